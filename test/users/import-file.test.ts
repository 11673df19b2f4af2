/**
 * Reading files of users to create (bulk-create) without commander: JSON
 * lines and CSV, each row with the file's own line, problems in place.
 */
import { describe, expect, it } from 'vitest';
import { countImportRows, readImportFile, type ImportItem } from '../../src/users/import-file.js';
import { UsageError } from '../../src/errors.js';

async function items(text: string): Promise<{ items: ImportItem[]; format: string }> {
  const file = readImportFile(chunks(text));
  const out: ImportItem[] = [];
  for await (const item of file.items) out.push(item);
  return { items: out, format: file.format() };
}

async function* chunks(...parts: string[]): AsyncGenerator<Buffer> {
  for (const part of parts) yield Buffer.from(part);
}

const user = (name: string, fullName = '') => ({ username: name, email: `${name}@example.com`, password: 'correct-horse', full_name: fullName });

describe('readImportFile: JSON lines', () => {
  it('gives each row its line, skips blank lines, and turns bad lines into problems', async () => {
    const text = [
      JSON.stringify(user('amy')),
      '',
      '{"username": "broken", ',
      JSON.stringify({ username: 'typo', fullname: 'T' }),
      '   ',
      JSON.stringify({ username: 'num', email: 5 }),
      '[1]',
      JSON.stringify({ ...user('bea'), full_name: 'Bea B' }),
    ].join('\r\n');
    expect(await items(text)).toEqual({
      format: 'jsonl',
      items: [
        { line: 1, request: user('amy') },
        { line: 3, problem: 'not valid JSON (at character 24)' },
        { line: 4, problem: 'unknown field "fullname"; expected username, email, password, full_name' },
        { line: 6, problem: 'email must be a string' },
        { line: 7, problem: 'not a JSON object' },
        { line: 8, request: user('bea', 'Bea B') },
      ],
    });
  });

  it('never quotes a row in a problem (it holds a password)', async () => {
    const {
      items: [item],
    } = await items('{"username":"x","password":"hunter2-secret",}\n');
    expect(item).toMatchObject({ line: 1 });
    expect(JSON.stringify(item)).not.toContain('hunter2');
  });
});

describe('readImportFile: CSV', () => {
  it('maps columns by the header, in any order and case, with the line each row starts on', async () => {
    const text =
      'Email,USERNAME,password,full_name\r\namy@example.com,amy,correct-horse,"Amy, ""the"" First"\r\n\r\nbea@example.com,bea,correct-horse,"two\r\nlines"\r\ncid@example.com,cid,correct-horse,C\r\n';
    expect(await items(text)).toEqual({
      format: 'csv',
      items: [
        { line: 2, request: user('amy', 'Amy, "the" First') },
        { line: 4, request: user('bea', 'two\r\nlines') },
        { line: 6, request: user('cid', 'C') },
      ],
    });
  });

  it('reports rows with the wrong number of fields and broken quotes at their own lines', async () => {
    const text =
      'username,email,password\n"multi\nline",m@example.com,correct-horse\nshort,s@example.com\nsmall1,small1@example.com,password-1\nbroken,"unterminated\n';
    expect((await items(text)).items).toEqual([
      { line: 2, request: { username: 'multi\nline', email: 'm@example.com', password: 'correct-horse', full_name: '' } },
      { line: 4, problem: '2 fields where the header has 3' },
      { line: 5, request: { username: 'small1', email: 'small1@example.com', password: 'password-1', full_name: '' } },
      { line: 6, problem: 'the quote opened on line 6 is not closed before the end of the input' },
    ]);
  });

  it('refuses a header with unknown, missing or repeated columns, naming no cell of a data row', async () => {
    await expect(items('username,email,password,fullname\n')).rejects.toThrow(/line 1.*unknown: fullname/);
    await expect(items('username,email,password,email\n')).rejects.toThrow(/repeated: email/);
    const headless = items('\n\nyann,y@example.com,secret-pw-1\n');
    await expect(headless).rejects.toBeInstanceOf(UsageError);
    await expect(headless).rejects.toThrow(/^the CSV header \(line 3\) .*; missing: username, email, password$/);
  });
});

describe('readImportFile: the format', () => {
  it('is JSON lines when the first character is {, else CSV; an array is refused; nothing is empty', async () => {
    expect((await items('\uFEFF  \n{"username":"a"}\n')).format).toBe('jsonl');
    expect((await items('  \n\n')).format).toBe('empty');
    await expect(items('  [{"username":"zed"}]')).rejects.toThrow('JSON array');
  });
});

describe('countImportRows', () => {
  it('counts every row, good or not, as the reading does', async () => {
    expect(await countImportRows(chunks('username,email,password\na,b,c\n"x\ny",1,2\n\nbad,"open\n'))).toBe(3);
    expect(await countImportRows(chunks('{"username":"a"}\n\nnot json\n{}\n'))).toBe(3);
  });
});
