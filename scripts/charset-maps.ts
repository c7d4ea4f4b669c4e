/**
 * Writes conf/koi-utf, conf/koi-win and conf/win-utf: the `charset_map`
 * files nginx users `include` (nginx ships files of these names), made from
 * the WHATWG tables of koi8-r and windows-1251 that Node's TextDecoder
 * holds. Unlike nginx's own, these maps are complete (box drawing and the
 * rest), and they name no koi8-u letters. Run: node scripts/charset-maps.ts
 */
import fs from 'node:fs';
import path from 'node:path';

const CONF = path.join(import.meta.dirname, '..', 'conf');

/** The character of each byte 0x80-0xFF, leaving out C1 controls and bytes the charset does not define. */
function upperHalf(label: string): Map<number, string> {
  const decoder = new TextDecoder(label);
  const chars = new Map<number, string>();
  for (let b = 0x80; b < 0x100; b++) {
    const c = decoder.decode(Uint8Array.of(b));
    const code = c.codePointAt(0)!;
    if (c === '\ufffd' || (code >= 0x80 && code < 0xa0)) continue;
    chars.set(b, c);
  }
  return chars;
}

const hex = (n: number) => n.toString(16).toUpperCase().padStart(2, '0');
const codePoint = (c: string) => `U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;

function toUtf8(label: string): string {
  const lines = [...upperHalf(label)].map(([b, c]) => `    ${hex(b)}  ${Buffer.from(c).toString('hex').toUpperCase()} ; # ${codePoint(c)}`);
  return `charset_map  ${label}  utf-8 {\n${lines.join('\n')}\n}\n`;
}

function between(from: string, to: string): string {
  const target = new Map([...upperHalf(to)].map(([b, c]) => [c, b]));
  const lines: string[] = [];
  for (const [b, c] of upperHalf(from)) {
    const t = target.get(c);
    if (t !== undefined) lines.push(`    ${hex(b)}  ${hex(t)} ; # ${codePoint(c)}`);
  }
  return `charset_map  ${from}  ${to} {\n${lines.join('\n')}\n}\n`;
}

const HEADER = (what: string) => `# ${what}, for \`include\` in an http block (a charset_map may appear once per\n`
  + '# pair of charsets). Written by scripts/charset-maps.ts from the WHATWG encoding\n'
  + '# tables; bytes below 0x80 are ASCII in both and need no line.\n\n';

fs.writeFileSync(path.join(CONF, 'koi-utf'), HEADER('koi8-r to utf-8 (and back)') + toUtf8('koi8-r'));
fs.writeFileSync(path.join(CONF, 'win-utf'), HEADER('windows-1251 to utf-8 (and back)') + toUtf8('windows-1251'));
fs.writeFileSync(path.join(CONF, 'koi-win'), HEADER('koi8-r to windows-1251 (and back)') + between('koi8-r', 'windows-1251'));
