/**
 * OpenSSL's error text as nginx prints it after `SSL_do_handshake() failed`:
 * Node's `…:error:0A0000C1:SSL routines:func:no shared cipher:…ssl.c:123:`
 * becomes `error:0A0000C1:SSL routines::no shared cipher`.
 */
export function handshakeErrorText(err: Error): string {
  return err.message.replace(/^[0-9A-F]+:error:/, 'error:').replace(/:[^:]*\.c:\d+:.*$/s, '')
    .replace(/^(error:[0-9A-F]+:[^:]+:)[^:]*:/, '$1:');
}
