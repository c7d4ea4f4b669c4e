/** A configuration error, printed as nginx prints it: `[emerg] message in file:line`. */
export class ConfError extends Error {
  file: string | undefined;
  line: number | undefined;
  level: string;
  constructor(message: string, file?: string, line?: number, level = 'emerg') {
    super(message);
    this.file = file;
    this.line = line;
    this.level = level;
  }
  /** The text after `[emerg] `, with the location nginx appends. */
  get text(): string {
    if (this.file === undefined) return this.message;
    return this.file === 'command line' ? `${this.message} in command line` : `${this.message} in ${this.file}:${this.line}`;
  }
}

/** nginx's `(errno: strerror)` suffix for a Node system error. */
export function sysErrorText(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  const code = e && typeof e.errno === 'number' ? Math.abs(e.errno) : 0;
  return `(${code}: ${strerror(e?.code)})`;
}

const STRERROR: Record<string, string> = {
  ENOENT: 'No such file or directory',
  EACCES: 'Permission denied',
  EADDRINUSE: 'Address already in use',
  EADDRNOTAVAIL: 'Cannot assign requested address',
  EISDIR: 'Is a directory',
  ENOTDIR: 'Not a directory',
  EEXIST: 'File exists',
  EPERM: 'Operation not permitted',
  ECONNREFUSED: 'Connection refused',
  ECONNRESET: 'Connection reset by peer',
  ETIMEDOUT: 'Connection timed out',
  EPIPE: 'Broken pipe',
  EINVAL: 'Invalid argument',
  ESRCH: 'No such process',
  ENAMETOOLONG: 'File name too long',
  ELOOP: 'Too many levels of symbolic links',
  EMFILE: 'Too many open files',
  EHOSTUNREACH: 'No route to host',
  ENETUNREACH: 'Network is unreachable',
};

export function strerror(code: string | undefined): string {
  return (code && STRERROR[code]) || code || 'Unknown error';
}
