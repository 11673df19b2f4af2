/**
 * The CSV reader of import files: records with the line each starts on,
 * whatever the chunking, the line ends and the quoted line breaks before it.
 */
import { describe, expect, it } from 'vitest';
import { csvRecords, type CsvRecord } from '../src/csv-records.js';

async function read(...chunks: (string | Buffer)[]): Promise<CsvRecord[]> {
  const records: CsvRecord[] = [];
  for await (const record of csvRecords(
    (async function* () {
      yield* chunks;
    })(),
  ))
    records.push(record);
  return records;
}

/** The same text cut into one-character chunks: no state may depend on where a chunk ends. */
function byCharacter(text: string): Buffer[] {
  return [...Buffer.from(text)].map((byte) => Buffer.from([byte]));
}

describe('csvRecords', () => {
  it('numbers records by the line they start on, past quoted line breaks and blank lines', async () => {
    const text = 'a,b\n"one\ntwo",x\n\n  \nc,"d ""q"", e"\n"three\r\nfour\r\nfive",y\nlast,z';
    const expected = [
      { line: 1, fields: ['a', 'b'] },
      { line: 2, fields: ['one\ntwo', 'x'] },
      { line: 6, fields: ['c', 'd "q", e'] },
      { line: 7, fields: ['three\r\nfour\r\nfive', 'y'] },
      { line: 10, fields: ['last', 'z'] },
    ];
    expect(await read(text)).toEqual(expected);
    expect(await read(...byCharacter(text))).toEqual(expected);
  });

  it('takes CRLF as a record end, keeps a lone CR as data, and drops a BOM', async () => {
    expect(await read('\uFEFFa,b\r\nc\rd,e\r\n')).toEqual([
      { line: 1, fields: ['a', 'b'] },
      { line: 2, fields: ['c\rd', 'e'] },
    ]);
    expect(await read(Buffer.from([0xef, 0xbb, 0xbf]), 'x,y\n')).toEqual([{ line: 1, fields: ['x', 'y'] }]);
  });

  it('reports a quote left open at the end at the line of its record', async () => {
    expect(await read('username,email,password\nsmall1,small1@example.com,password-1\nbroken,"unterminated\n')).toEqual([
      { line: 1, fields: ['username', 'email', 'password'] },
      { line: 2, fields: ['small1', 'small1@example.com', 'password-1'] },
      { line: 3, error: 'the quote opened on line 3 is not closed before the end of the input' },
    ]);
    expect(await read('a,"x\ny","open\nmore')).toEqual([{ line: 1, error: 'the quote opened on line 2 is not closed before the end of the input' }]);
  });

  it('refuses text after a closing quote and a bare quote inside a field, and reads on at the next line', async () => {
    expect(await read('"a"b,c\nok,1\nx"y,2\n"multi\nline"z,3\nfine,4\n')).toEqual([
      { line: 1, error: 'a closing quote must be followed by a comma or the end of the line' },
      { line: 2, fields: ['ok', '1'] },
      { line: 3, error: 'a field with a quote in it must be quoted as a whole, the quote doubled ("a ""b"" c")' },
      { line: 4, error: 'a closing quote must be followed by a comma or the end of the line (line 5)' },
      { line: 6, fields: ['fine', '4'] },
    ]);
  });

  it('keeps empty fields and a last record without a line end', async () => {
    expect(await read('a,,\n,"",b')).toEqual([
      { line: 1, fields: ['a', '', ''] },
      { line: 2, fields: ['', '', 'b'] },
    ]);
    expect(await read('')).toEqual([]);
    expect(await read('\n\n')).toEqual([]);
  });

  it('decodes UTF-8 split across chunks', async () => {
    const bytes = Buffer.from('name\nJürgen Ødegård 🎉\n');
    expect(await read(...[...bytes].map((b) => Buffer.from([b])))).toEqual([
      { line: 1, fields: ['name'] },
      { line: 2, fields: ['Jürgen Ødegård 🎉'] },
    ]);
  });
});
