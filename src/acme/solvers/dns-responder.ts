/**
 * dns-01 answered by Gatehouse itself (as Angie's `acme_dns_port`): the
 * user delegates `_acme-challenge.<name>` to this server once (an NS or
 * CNAME record), and every worker answers TXT queries for it on the
 * address of `acme_dns_port`, over UDP and TCP, from the shared zone, where
 * the worker that talks to the CA publishes the values. Only what
 * validators ask is answered: TXT for names with a pending challenge;
 * NXDOMAIN for the rest.
 */
import type { Socket } from 'node:net';
import type { SharedDocument } from '../../core/shared-document.ts';
import { readName } from '../../upstream/dns-message.ts';
import { dnsRecordName, dnsValue } from './dns-01.ts';
import type { Solver } from './solver.ts';

const KIND = 'dns-01';
const TYPE_TXT = 16;
const CLASS_IN = 1;

function records(doc: SharedDocument, name: string): string[] {
  return (doc.read()[KIND]?.[name] as string[] | undefined) ?? [];
}

/** What an answer over UDP may be without EDNS (RFC 1035 §4.2.1). */
const UDP_LIMIT = 512;
/** The UDP payload this responder offers in its OPT record (RFC 6891; the DNS flag day's 1232). */
const EDNS_PAYLOAD = 1232;
const TYPE_OPT = 41;

/** The question's end, and the requester's UDP payload size when the query has an OPT record. */
function readQuery(query: Buffer): { end: number; edns: number | undefined } | undefined {
  if (query.length < 17 || query[2] & 0x80 || query.readUInt16BE(4) !== 1) return undefined;
  // the query's name is not compressed
  let end = 12;
  while (end < query.length && query[end] !== 0) end += query[end] + 1;
  end += 5;
  if (end > query.length) return undefined;
  let edns: number | undefined;
  // an OPT record (root name, type 41, class = payload size) among the additional records
  if (query.readUInt16BE(10) > 0 && query.length >= end + 11 && query[end] === 0 && query.readUInt16BE(end + 1) === TYPE_OPT) {
    edns = Math.max(UDP_LIMIT, query.readUInt16BE(end + 3));
  }
  return { end, edns };
}

/**
 * The answer to one DNS query, or undefined when it is not a query worth
 * answering. `udp`: the answer must fit the requester's UDP payload (512
 * bytes without EDNS); one that would not is sent truncated (TC, no
 * answers), as an authoritative server does, and the resolver asks again
 * over TCP (dnsTcpConnection).
 */
export function dnsAnswer(doc: SharedDocument, query: Buffer, udp = true): Buffer | undefined {
  const read = readQuery(query);
  if (!read) return undefined;
  const q = readName(query, 12);
  if ('error' in q) return undefined;
  const { end, edns } = read;
  const qtype = query.readUInt16BE(end - 4);
  const values = records(doc, q.name);
  const answers = qtype === TYPE_TXT ? values : [];
  const build = (truncated: boolean): Buffer => {
    const head = Buffer.alloc(12);
    head.writeUInt16BE(query.readUInt16BE(0), 0);
    // QR, AA, TC when truncated, the client's RD; NXDOMAIN for a name without records
    head.writeUInt16BE(0x8400 | (truncated ? 0x0200 : 0) | (query.readUInt16BE(2) & 0x0100) | (values.length ? 0 : 3), 2);
    head.writeUInt16BE(1, 4);
    const listed = truncated ? [] : answers;
    head.writeUInt16BE(listed.length, 6);
    head.writeUInt16BE(edns !== undefined ? 1 : 0, 10);
    const parts = [head, query.subarray(12, end)];
    for (const v of listed) {
      const txt = Buffer.from(v, 'latin1');
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0);
      rr.writeUInt16BE(TYPE_TXT, 2);
      rr.writeUInt16BE(CLASS_IN, 4);
      rr.writeUInt32BE(0, 6);
      rr.writeUInt16BE(txt.length + 1, 10);
      parts.push(rr, Buffer.from([txt.length]), txt);
    }
    if (edns !== undefined) {
      const opt = Buffer.alloc(11);
      opt.writeUInt16BE(TYPE_OPT, 1);
      opt.writeUInt16BE(EDNS_PAYLOAD, 3);
      parts.push(opt);
    }
    return Buffer.concat(parts);
  };
  const full = build(false);
  return udp && full.length > Math.min(edns ?? UDP_LIMIT, EDNS_PAYLOAD) ? build(true) : full;
}

const TCP_IDLE_MS = 10_000;

/**
 * DNS over TCP (RFC 7766): each message with its two-byte length, several
 * queries on one connection answered in turn, the connection closed after
 * 10 s without one (the idle time the RFC suggests).
 */
export function dnsTcpConnection(doc: SharedDocument, socket: Socket): void {
  let pending: Buffer = Buffer.alloc(0);
  socket.setTimeout(TCP_IDLE_MS, () => socket.destroy());
  socket.on('error', () => socket.destroy());
  socket.on('data', (chunk: Buffer) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
      const query = pending.subarray(2, 2 + pending.readUInt16BE(0));
      pending = pending.subarray(2 + query.length);
      const answer = dnsAnswer(doc, query, false);
      if (!answer) {
        socket.destroy();
        return;
      }
      const length = Buffer.alloc(2);
      length.writeUInt16BE(answer.length);
      socket.write(Buffer.concat([length, answer]));
    }
  });
}

/** dns-01 through the built-in responder: the TXT values go to the shared zone. */
export function dnsResponderSolver(doc: SharedDocument): Solver {
  const value = dnsValue;
  return {
    type: 'dns-01',
    publish(id, _token, keyAuthorization) {
      const name = dnsRecordName(id).toLowerCase();
      doc.update((d) => {
        const m = (d[KIND] ??= {});
        m[name] = [...((m[name] as string[] | undefined) ?? []), value(keyAuthorization)];
      });
    },
    remove(id, _token, keyAuthorization) {
      const name = dnsRecordName(id).toLowerCase();
      doc.update((d) => {
        const m = d[KIND];
        if (!m) return;
        const left = ((m[name] as string[] | undefined) ?? []).filter((v) => v !== value(keyAuthorization));
        if (left.length) m[name] = left;
        else delete m[name];
      });
    },
  };
}
