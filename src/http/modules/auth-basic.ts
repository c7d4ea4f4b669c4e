/**
 * ngx_http_auth_basic_module: `auth_basic realm|off` and
 * `auth_basic_user_file`, read on every request as nginx does (so edits
 * apply at once). A failed check answers 401 with
 * `WWW-Authenticate: Basic realm="…"` and nginx's error log lines; the
 * delay of `auth_delay` (core) is applied by the access phase.
 */
import fs from 'node:fs';
import path from 'node:path';
import { defineSlot } from '../../conf/context.ts';
import { setting } from '../../conf/setters.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import { sysErrorText } from '../../conf/errors.ts';
import { verifyPassword } from '../../core/crypt.ts';
import { DECLINED, OK, httpMainOf } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';

interface AuthBasicConf {
  realm?: ComplexValue;
  userFile?: { value: ComplexValue; confPrefix: string };
}

const authBasicSlot = defineSlot<AuthBasicConf>('auth_basic', () => ({}), (parent, child) => {
  child.realm ??= parent.realm;
  child.userFile ??= parent.userFile;
});

export interface BasicCredentials {
  user: Buffer;
  password: Buffer;
}

/** The user and password of `Authorization: Basic …` (ngx_http_auth_basic_user), or undefined. */
export function basicCredentials(r: HttpRequest): BasicCredentials | undefined {
  const header = r.header('authorization');
  if (header === undefined || header.length < 6 || header.slice(0, 6).toLowerCase() !== 'basic ') return undefined;
  const encoded = header.slice(6).replace(/^ +/, '');
  if (!encoded || !/^[A-Za-z0-9+/]*={0,2}$/.test(encoded) || encoded.replace(/=+$/, '').length % 4 === 1) return undefined;
  const decoded = Buffer.from(encoded, 'base64');
  const colon = decoded.indexOf(0x3a);
  if (colon <= 0) return undefined;
  return { user: decoded.subarray(0, colon), password: decoded.subarray(colon + 1) };
}

/** The stored hash for `user` in an htpasswd file's text, as nginx's parser finds it. */
function findUser(text: Buffer, user: Buffer): string | undefined {
  let pos = 0;
  while (pos < text.length) {
    let eol = text.indexOf(0x0a, pos);
    if (eol < 0) eol = text.length;
    const first = text[pos];
    if (first !== 0x23 /* # */ && first !== 0x0d && eol - pos > user.length
      && text[pos + user.length] === 0x3a && text.subarray(pos, pos + user.length).equals(user)) {
      let end = pos + user.length + 1;
      while (end < eol && text[end] !== 0x0d && text[end] !== 0x3a) end++;
      return text.toString('latin1', pos + user.length + 1, end);
    }
    pos = eol + 1;
  }
  return undefined;
}

function askForCredentials(r: HttpRequest, realm: string): number {
  r.addHeader('WWW-Authenticate', `Basic realm="${realm}"`);
  return 401;
}

/** Declines synchronously where auth_basic is off (every request passes here). */
function authBasicHandler(r: HttpRequest): number | Promise<number> {
  const conf = r.level.get(authBasicSlot);
  if (!conf.realm || !conf.userFile) return DECLINED;
  const realm = conf.realm.evaluate(r);
  if (realm === 'off') return DECLINED;
  return checkCredentials(r, conf.userFile, realm);
}

async function checkCredentials(r: HttpRequest, userFile: NonNullable<AuthBasicConf['userFile']>, realm: string): Promise<number> {
  const log = requestLog(r);
  const creds = basicCredentials(r);
  if (!creds) {
    log.info('no user/password was provided for basic authentication');
    return askForCredentials(r, realm);
  }
  let file = userFile.value.evaluate(r);
  if (!path.isAbsolute(file)) file = userFile.confPrefix + file;
  let text: Buffer;
  try {
    text = await fs.promises.readFile(file);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ENOENT') {
      log.error(`open() "${file}" failed ${sysErrorText(e)}`);
      return 403;
    }
    log.crit(`${e.syscall === 'read' ? 'read()' : 'open()'} "${file}" failed ${sysErrorText(e)}`);
    return 500;
  }
  const user = creds.user.toString('latin1');
  const stored = findUser(text, creds.user);
  if (stored === undefined) {
    log.error(`user "${user}" was not found in "${file}"`);
    return askForCredentials(r, realm);
  }
  if (await verifyPassword(creds.password, stored)) return OK;
  log.error(`user "${user}": password mismatch`);
  return askForCredentials(r, realm);
}

export const authBasicModule: HttpModule = {
  name: 'ngx_http_auth_basic_module',
  directives: [
    {
      name: 'auth_basic', contexts: HTTP_ANY | Ctx.LMT, args: 1,
      handler: setting(authBasicSlot, 'realm', (cf, v) => compileComplex(cf, httpMainOf(cf).variables, v)),
    },
    {
      name: 'auth_basic_user_file', contexts: HTTP_ANY | Ctx.LMT, args: 1,
      handler: setting(authBasicSlot, 'userFile', (cf, value) => {
        // a constant relative path is resolved now; one with variables per request
        if (!value.includes('$') && !path.isAbsolute(value)) value = cf.paths.confPrefix + value;
        return { value: compileComplex(cf, httpMainOf(cf).variables, value), confPrefix: cf.paths.confPrefix };
      }),
    },
  ],
  postconfiguration(http) {
    // after allow/deny (access 100), as nginx runs them
    http.addPhaseHandler('ACCESS', 200, authBasicHandler);
  },
};
