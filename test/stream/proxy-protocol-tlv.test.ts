// $proxy_protocol_tlv_*: the TLVs of a PROXY protocol v2 header (nginx
// 1.23.2+, so Debian's 1.22 cannot be the reference here): named types,
// `0xHH` types, the SSL TLV's verify field and sub-TLVs, a header longer
// than a v1 line may be, and a TLV that is not there.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startGatehouse } from '../kit/server.ts';
import { converse } from './stream-kit.ts';

const conf = `
events {}
stream {
    server {
        listen 127.0.0.1:%%PORT_8081%% proxy_protocol;
        return "$remote_addr|$proxy_protocol_addr|$proxy_protocol_tlv_alpn|$proxy_protocol_tlv_authority|$proxy_protocol_tlv_0x3|$proxy_protocol_tlv_0x000ae|$proxy_protocol_tlv_0x0e|$proxy_protocol_tlv_ssl_verify|$proxy_protocol_tlv_ssl_version|$proxy_protocol_tlv_ssl_cn";
    }
}
`;

const tlv = (type: number, value: string | Buffer) => {
  const v = typeof value === 'string' ? Buffer.from(value, 'latin1') : value;
  const head = Buffer.alloc(3);
  head[0] = type;
  head.writeUInt16BE(v.length, 1);
  return Buffer.concat([head, v]);
};

/** A v2 header from 192.0.2.1:123 to 192.0.2.2:5678 with `tlvs`. */
function header(tlvs: Buffer): string {
  const addrs = Buffer.from([192, 0, 2, 1, 192, 0, 2, 2, 0, 123, 0x16, 0x2e]);
  const len = Buffer.alloc(2);
  len.writeUInt16BE(addrs.length + tlvs.length);
  return Buffer.concat([Buffer.from('\r\n\r\n\0\r\nQUIT\n', 'latin1'), Buffer.from([0x21, 0x11]), len, addrs, tlvs]).toString('latin1');
}

test('PROXY protocol v2 TLVs become $proxy_protocol_tlv_* variables', async (t) => {
  const srv = await startGatehouse({ conf });
  t.after(() => srv.stop());
  const verify = Buffer.from([0x01, 0, 0, 0, 255]);
  const ssl = Buffer.concat([verify, tlv(0x21, 'TLSv1.3'), tlv(0x22, 'client.example')]);
  const tlvs = Buffer.concat([tlv(0x01, 'h2'), tlv(0x02, 'example.com'), tlv(0x03, '4321'), tlv(0xae, 'first'), tlv(0xae, 'second'), tlv(0x20, ssl), tlv(0x05, 'x'.repeat(120))]);
  const r = await converse(srv.port(8081), [{ send: header(tlvs) }]);
  assert.deepEqual(r, { data: '127.0.0.1|192.0.2.1|h2|example.com|4321|first||255|TLSv1.3|client.example', end: 'fin' });
  const none = await converse(srv.port(8081), [{ send: header(Buffer.alloc(0)) }]);
  assert.deepEqual(none, { data: '127.0.0.1|192.0.2.1||||||||', end: 'fin' });
});
