/**
 * Names and versions. Gatehouse names itself where nginx names itself (the
 * `Server` header, the end of its own error pages): `gatehouse/VERSION`,
 * VERSION being package.json's, as OpenResty, Tengine and Angie name
 * themselves. The nginx release whose behaviour Gatehouse follows keeps its
 * own places: `$nginx_version` (http and stream) and `-v`/`-V`'s
 * `nginx version:` line, which test harnesses parse.
 */
import fs from 'node:fs';

export const NGINX_VERSION = '1.28.0';
export const NGINX_VER = `nginx/${NGINX_VERSION}`;

export const GATEHOUSE_NAME = 'gatehouse';
export const GATEHOUSE_VERSION = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version as string;
export const GATEHOUSE_VER = `${GATEHOUSE_NAME}/${GATEHOUSE_VERSION}`;
/**
 * nginx's NGINX_BUILD (`./configure --build=NAME`), shown by `server_tokens
 * build` as `VER (NAME)`; Gatehouse has no build name, so `build` shows what
 * `on` shows.
 */
export const GATEHOUSE_BUILD: string | undefined = undefined;
export const GATEHOUSE_VER_BUILD = GATEHOUSE_BUILD === undefined ? GATEHOUSE_VER : `${GATEHOUSE_VER} (${GATEHOUSE_BUILD})`;

/** What the `Server` header and the error pages' signature say for a `server_tokens` value. */
export function serverSignature(tokens: 'on' | 'off' | 'build'): string {
  return tokens === 'off' ? GATEHOUSE_NAME : tokens === 'build' ? GATEHOUSE_VER_BUILD : GATEHOUSE_VER;
}
