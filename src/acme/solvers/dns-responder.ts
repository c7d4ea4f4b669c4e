/**
 * dns-01 answered by Gatehouse itself (as Angie's `acme_dns_port`): the
 * user delegates `_acme-challenge.<name>` to this server once (an NS or
 * CNAME record), and every worker answers TXT queries for it on the UDP
 * address of `acme_dns_port` from the shared zone, where the worker that
 * talks to the CA publishes the values. Only what validators ask is
 * answered: TXT for names with a pending challenge; NXDOMAIN for the rest.
 */
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

/** The answer to one DNS query (a UDP datagram), or undefined when it is not a query worth answering. */
export function dnsAnswer(doc: SharedDocument, query: Buffer): Buffer | undefined {
  if (query.length < 17 || query[2] & 0x80 || query.readUInt16BE(4) !== 1) return undefined;
  const q = readName(query, 12);
  if ('error' in q) return undefined;
  // the question's end: the query's name is not compressed
  let end = 12;
  while (end < query.length && query[end] !== 0) end += query[end] + 1;
  end += 5;
  if (end > query.length) return undefined;
  const qtype = query.readUInt16BE(end - 4);
  const values = records(doc, q.name);
  const answers = qtype === TYPE_TXT ? values : [];
  const head = Buffer.alloc(12);
  head.writeUInt16BE(query.readUInt16BE(0), 0);
  // QR, AA, the client's RD; NXDOMAIN for a name without records
  head.writeUInt16BE(0x8400 | (query.readUInt16BE(2) & 0x0100) | (values.length ? 0 : 3), 2);
  head.writeUInt16BE(1, 4);
  head.writeUInt16BE(answers.length, 6);
  const parts = [head, query.subarray(12, end)];
  for (const v of answers) {
    const txt = Buffer.from(v, 'latin1');
    const rr = Buffer.alloc(12);
    rr.writeUInt16BE(0xc00c, 0);
    rr.writeUInt16BE(TYPE_TXT, 2);
    rr.writeUInt16BE(CLASS_IN, 4);
    rr.writeUInt32BE(0, 6);
    rr.writeUInt16BE(txt.length + 1, 10);
    parts.push(rr, Buffer.from([txt.length]), txt);
  }
  return Buffer.concat(parts);
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
