/**
 * CSV records (RFC 4180) read as they stream in, each with the line of the
 * file it starts on, so that a message points at the file's own line even
 * when quoted fields before it span several lines. (csv-parse reports the
 * line where it noticed a problem, which for a quote left open at the end
 * of the input, or with CRLF line ends, is not the record's line.)
 *
 * Fields are separated by commas and records by LF or CRLF; a field in
 * double quotes may hold commas, line breaks (kept as they are) and `""`
 * for a quote. Blank lines are skipped and a leading BOM is dropped. A
 * record that breaks the rules is reported as an error at its first line,
 * and reading goes on at the next line.
 */

export type CsvRecord = { line: number; fields: string[] } | { line: number; error: string };

type State =
  /** Nothing of the current field read yet. */
  | 'fieldStart'
  | 'unquoted'
  | 'quoted'
  /** A quote inside a quoted field: the closing one, or the first of `""`. */
  | 'quoteInQuoted'
  /** After a field's closing quote: only a comma or the end of the record may follow. */
  | 'closed'
  /** The rest of a line whose record was refused. */
  | 'skipping';

class CsvReader {
  readonly out: CsvRecord[] = [];
  #line = 1;
  #recordLine = 1;
  #quoteLine = 1;
  #fields: string[] = [];
  #field = '';
  #state: State = 'fieldStart';
  /** A CR outside quotes: a record end if LF follows, else data. */
  #pendingCr = false;
  #first = true;

  feed(text: string): void {
    for (const c of text) {
      if (this.#first) {
        this.#first = false;
        if (c === '\uFEFF') continue;
      }
      if (this.#pendingCr) {
        this.#pendingCr = false;
        if (c === '\n') {
          this.#endRecord();
          this.#newLine();
          continue;
        }
        if (this.#state === 'closed') this.#refuse('a closing quote must be followed by a comma or the end of the line');
        else this.#data('\r');
      }
      this.#char(c);
    }
  }

  end(): void {
    if (this.#pendingCr) {
      this.#pendingCr = false;
      if (this.#state !== 'skipping') this.#endRecord();
      return;
    }
    switch (this.#state) {
      case 'quoted':
        this.out.push({ line: this.#recordLine, error: `the quote opened on line ${this.#quoteLine} is not closed before the end of the input` });
        return;
      case 'skipping':
        return;
      case 'fieldStart':
        if (this.#fields.length > 0) this.#endRecord();
        return;
      default:
        this.#endRecord();
    }
  }

  #char(c: string): void {
    const state = this.#state;
    if (state === 'skipping') {
      if (c === '\n') {
        this.#state = 'fieldStart';
        this.#newLine();
      }
      return;
    }
    if (state === 'quoted') {
      if (c === '"') this.#state = 'quoteInQuoted';
      else {
        if (c === '\n') this.#line++;
        this.#field += c;
      }
      return;
    }
    if (state === 'quoteInQuoted') {
      if (c === '"') {
        this.#field += '"';
        this.#state = 'quoted';
        return;
      }
      this.#state = 'closed';
    }
    if (c === ',') {
      this.#fields.push(this.#field);
      this.#field = '';
      this.#state = 'fieldStart';
    } else if (c === '\n') {
      this.#endRecord();
      this.#newLine();
    } else if (c === '\r') {
      this.#pendingCr = true;
    } else if (this.#state === 'closed') {
      this.#refuse('a closing quote must be followed by a comma or the end of the line');
    } else if (c === '"') {
      if (this.#state === 'fieldStart') {
        this.#state = 'quoted';
        this.#quoteLine = this.#line;
      } else {
        this.#refuse('a field with a quote in it must be quoted as a whole, the quote doubled ("a ""b"" c")');
      }
    } else {
      this.#data(c);
    }
  }

  #data(c: string): void {
    this.#field += c;
    this.#state = 'unquoted';
  }

  #endRecord(): void {
    this.#fields.push(this.#field);
    const blank = this.#fields.length === 1 && this.#state !== 'closed' && this.#fields[0]!.trim() === '';
    if (!blank) this.out.push({ line: this.#recordLine, fields: this.#fields });
    this.#fields = [];
    this.#field = '';
    this.#state = 'fieldStart';
  }

  #refuse(problem: string): void {
    const where = this.#line === this.#recordLine ? '' : ` (line ${this.#line})`;
    this.out.push({ line: this.#recordLine, error: `${problem}${where}` });
    this.#fields = [];
    this.#field = '';
    this.#state = 'skipping';
  }

  /** After an LF outside quotes: the next record, if one starts here, starts on this line. */
  #newLine(): void {
    this.#line++;
    if (this.#state === 'fieldStart' && this.#fields.length === 0) this.#recordLine = this.#line;
  }
}

export async function* csvRecords(source: AsyncIterable<Buffer | string>): AsyncGenerator<CsvRecord> {
  const decoder = new TextDecoder('utf-8');
  const reader = new CsvReader();
  for await (const chunk of source) {
    reader.feed(typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true }));
    yield* reader.out.splice(0);
  }
  reader.feed(decoder.decode());
  reader.end();
  yield* reader.out.splice(0);
}
