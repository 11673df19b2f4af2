/**
 * The graph API's `fields` syntax: `id,caption,insights.metric(reach,saved)`,
 * with modifiers (`.metric(...)`, `.limit(...)`) and nested field lists
 * (`{...}`), split at top-level commas only.
 */

export interface FieldRequest {
  name: string;
  /** `.metric(a,b)` -> { metric: ['a', 'b'] } */
  modifiers: Record<string, string[]>;
  /** `{a,b}` -> the nested requests; undefined without braces. */
  children: FieldRequest[] | undefined;
}

export class FieldSyntaxError extends Error {}

/** Splits at commas that are not inside parentheses or braces. */
function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (char === '(' || char === '{') depth++;
    else if (char === ')' || char === '}') {
      depth--;
      if (depth < 0) throw new FieldSyntaxError(`unbalanced "${char}" in fields`);
    } else if (char === ',' && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  if (depth !== 0) throw new FieldSyntaxError('unbalanced brackets in fields');
  parts.push(text.slice(start));
  return parts.map((part) => part.trim()).filter((part) => part !== '');
}

function parseOne(text: string): FieldRequest {
  const match = /^([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_]+\([^()]*\))*)(\{.*\})?$/s.exec(text);
  if (!match) throw new FieldSyntaxError(`cannot parse field "${text}"`);
  const [, name, modifierText, braces] = match;
  const modifiers: Record<string, string[]> = {};
  for (const [, modifier, args] of modifierText!.matchAll(/\.([A-Za-z_]+)\(([^()]*)\)/g)) {
    modifiers[modifier!] = args!
      .split(',')
      .map((arg) => arg.trim())
      .filter(Boolean);
  }
  return { name: name!, modifiers, children: braces === undefined ? undefined : parseFields(braces.slice(1, -1)) };
}

export function parseFields(text: string): FieldRequest[] {
  return splitTopLevel(text).map(parseOne);
}
