/**
 * The nginx release whose behaviour Gatehouse follows: `$nginx_version`
 * (http and stream), `-V`'s `nginx version:` line, the `Server` header.
 */
export const NGINX_VERSION = '1.28.0';
export const NGINX_VER = `nginx/${NGINX_VERSION}`;
