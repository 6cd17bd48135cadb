/**
 * Text from the store shown to a person (a terminal, a Markdown report), where
 * characters that act instead of showing could rewrite what is shown: a carriage
 * return (CommonMark reads a bare CR as a line ending: a service name with one broke
 * a report's table and began a heading of its own), escape sequences (ESC, OSC),
 * other C0 and C1 controls, DEL, and the bidirectional overrides and isolates
 * (Unicode TR #9; "Trojan Source", CVE-2021-42574). Found by a break-it pass.
 */
// C0 but tab and line feed, DEL, C1, ALM, LRM/RLM, LS/PS, LRE..RLO, LRI..PDI
const ACTING = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * `s` with each character that acts rather than shows (see above) written as its
 * escape: `\x1B` below U+0100, `\u202E` above. Tabs and line feeds stay.
 */
export function visibleText(s: string): string {
  return s.replace(ACTING, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).toUpperCase().padStart(2, '0')}` : `\\u${code.toString(16).toUpperCase().padStart(4, '0')}`;
  });
}

/** `s` on one line: each line break (CR LF, CR, LF, NEL, LS, PS) a space, then {@link visibleText}. */
export function oneLine(s: string): string {
  return visibleText(s.replace(/\r\n|[\r\n\u0085\u2028\u2029]/g, ' '));
}
