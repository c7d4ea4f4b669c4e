/**
 * What `-V` reports, in the words nginx's own test harness reads: optional
 * modules we implement appear as `--with-…`; standard modules we do not
 * implement appear as `--without-…` so the harness skips their tests.
 * Update this list when a module lands.
 */

/** Optional nginx modules (off unless configured `--with-…`) that Gatehouse implements. */
export const WITH: string[] = ['http_ssl_module', 'http_v2_module', 'http_sub_module', 'http_gzip_static_module', 'http_gunzip_module', 'http_dav_module', 'http_realip_module', 'stream', 'stream_realip_module', 'stream_ssl_preread_module', 'stream_ssl_module', 'http_auth_request_module', 'http_addition_module', 'http_secure_link_module', 'http_random_index_module', 'http_stub_status_module', 'http_slice_module'];

/** Standard nginx modules (on unless configured `--without-…`) that Gatehouse does not implement yet. */
export const WITHOUT: string[] = [
  'http_browser_module',
  'http_tunnel_module',
  'mail_pop3_module', 'mail_imap_module', 'mail_smtp_module',
];
