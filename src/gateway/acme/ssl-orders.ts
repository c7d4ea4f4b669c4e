/**
 * The gateway's SSL objects that ask for their certificate from an issuer
 * (`acme: {issuer, key, fallback}` instead of `cert`/`key`, Gatehouse's
 * field; APISIX users asked for it in apache/apisix #1399 and #11845). In
 * worker 0 of the node holding the store's lease (leader.ts), one
 * AcmeManager per such object orders, renews and retries exactly as for
 * nginx's `acme_certificate` (src/acme/), with the challenges answered on
 * the gateway's own ports (http-01 on node_listen, tls-alpn-01 on the TLS
 * port, dns-01 by `gatehouse.acme.dns_port` or a hook). Where the nginx side
 * installs a certificate in the TLS registry, this one writes it into the
 * SSL object through the store — `cert`, and `key` encrypted with the
 * keyring as the Admin API stores it — so every worker of every node
 * serves it from its next handshake, with no reload; and `acme.status`
 * (state, validity, renewal time, last error: what GET shows, never the
 * key). Each certificate is also kept in the issuer's state_path: an
 * object PUT again without its certificate gets it back without an order.
 */
import type { ErrorLog } from '../../core/error-log.ts';
import type { SharedDocument } from '../../core/shared-document.ts';
import type { RuntimeCertificate } from '../../tls/certificate-registry.ts';
import { addIdentifier } from '../../acme/identifiers.ts';
import type { KeySpec } from '../../acme/jws.ts';
import { AcmeManager } from '../../acme/manager.ts';
import type { CertificateHome } from '../../acme/manager.ts';
import { certificateFits, orderId, storeCertificate, storedCertificate } from '../../acme/state.ts';
import type { IssuerConf, OrderConf } from '../../acme/state.ts';
import type { CertificateStatus } from '../../acme/status.ts';
import type { Keyring } from '../data-encryption.ts';
import type { ConfigFollower } from '../store/follower.ts';
import type { Store } from '../store/store.ts';
import type { ConfigView, SslConf } from '../router/config-view.ts';
import { SharedChallenges } from './challenges.ts';
import { StoreLease } from './leader.ts';

export interface GatewayAcmeOptions {
  store: Store;
  /** deployment.etcd.prefix (`/gateway`). */
  keyPrefix: string;
  keyring: Keyring | undefined;
  follower: ConfigFollower;
  /** The configuration version the data plane serves (keys decrypted). */
  view(): ConfigView;
  issuers: ReadonlyMap<string, IssuerConf>;
  /** The acme shared zone (http-01 and dns-01 answers). */
  doc: SharedDocument;
  log: ErrorLog;
  /** This node's name in the lease (host and prefix). */
  node: string;
}

interface Tracked { signature: string; order?: OrderConf; manager?: AcmeManager }

/** What makes an object's order: a change of these starts a new one; other changes (its status, its labels) do not. */
function signatureOf(conf: SslConf): string {
  const a = conf.acme!;
  return JSON.stringify([conf.snis ?? conf.sni, a.issuer, a.fallback ?? [], a.key ?? 'ecdsa:256']);
}

function keySpecOf(value: string | undefined): KeySpec {
  const [type, bits] = (value ?? 'ecdsa:256').split(':');
  return type === 'rsa' ? { type: 'rsa', bits: Number(bits) as 2048 } : { type: 'ecdsa', bits: Number(bits) as 256 };
}

/** acme_status's names, without the absent ones. */
function statusJson(s: CertificateStatus): Record<string, unknown> {
  const out: Record<string, unknown> = {
    state: s.state, issuer: s.issuer, not_before: s.notBefore, not_after: s.notAfter, renew_at: s.renewAt,
    next_attempt: s.nextAttempt, last_error: s.lastError, last_error_at: s.lastErrorAt,
  };
  for (const k of Object.keys(out)) if (out[k] === undefined) delete out[k];
  return out;
}

export class GatewayAcme {
  private readonly o: GatewayAcmeOptions;
  private readonly lease: StoreLease;
  private readonly challenges: SharedChallenges;
  private leading = false;
  private stopped = false;
  private readonly tracked = new Map<string, Tracked>();
  /** Each object as the data plane last showed it. */
  private readonly latest = new Map<string, SslConf>();
  /** Certificates this task installed, before the follower shows them in the object. */
  private readonly issued = new Map<string, RuntimeCertificate>();
  /** The status each manager published last. */
  private readonly statuses = new Map<string, CertificateStatus>();
  /** Writes to each object, one after the other. */
  private readonly writes = new Map<string, Promise<void>>();

  constructor(o: GatewayAcmeOptions) {
    this.o = o;
    this.lease = new StoreLease(o.store, `${o.keyPrefix}/gatehouse_acme/leader`, o.node, (leading) => {
      this.leading = leading;
      o.log.notice(leading ? `acme: this node (${o.node}) orders the certificates of the SSL objects` : `acme: another node orders the certificates of the SSL objects`);
      if (leading) this.sync();
      else this.stopAll();
    });
    this.challenges = new SharedChallenges(o.store, o.keyPrefix, o.node, o.doc, o.log);
    o.follower.onChange(() => this.sync());
  }

  start(): void {
    this.lease.start();
    void this.challenges.start();
  }

  stop(): void {
    this.stopped = true;
    this.lease.stop(false);
    this.challenges.stop();
    this.stopAll();
  }

  private stopAll(): void {
    for (const t of this.tracked.values()) t.manager?.stop();
    this.tracked.clear();
    this.issued.clear();
    this.statuses.clear();
  }

  /** Follows the SSL objects: a new or changed `acme` object gets a manager, a removed one loses it. */
  private sync(): void {
    if (!this.leading || this.stopped) return;
    const seen = new Set<string>();
    for (const { conf } of this.o.view().ssls) {
      if (!conf.acme || (conf.type ?? 'server') !== 'server') continue;
      seen.add(conf.id);
      this.latest.set(conf.id, conf);
      const signature = signatureOf(conf);
      const had = this.tracked.get(conf.id);
      if (had?.signature === signature) {
        if ((conf.cert === undefined || !conf.acme.status) && had.order) this.restore(conf.id, had.order, signature);
        continue;
      }
      had?.manager?.stop();
      this.issued.delete(conf.id);
      this.statuses.delete(conf.id);
      const order = this.orderOf(conf);
      if (typeof order === 'string') {
        this.o.log.error(`acme: SSL object "${conf.id}": ${order}`);
        this.tracked.set(conf.id, { signature });
        this.write(conf.id, signature, { status: { state: 'failing', issuer: conf.acme.issuer, identifiers: [], lastError: order, lastErrorAt: new Date().toISOString() } });
        continue;
      }
      const manager = new AcmeManager([order], this.o.doc, this.o.log, this.home(conf.id, signature));
      this.tracked.set(conf.id, { signature, order, manager });
      manager.start();
    }
    for (const [id, t] of this.tracked) {
      if (seen.has(id)) continue;
      t.manager?.stop();
      this.tracked.delete(id);
      this.latest.delete(id);
      this.issued.delete(id);
      this.statuses.delete(id);
    }
  }

  /** The object was PUT again without its certificate or status (the same order): what it had goes back in. */
  private restore(id: string, order: OrderConf, signature: string): void {
    const conf = this.latest.get(id);
    let cert = conf?.cert === undefined ? this.issued.get(id) ?? storedCertificate(order)?.cert : undefined;
    if (cert && !certificateFits(cert, order.names)) cert = undefined;
    const status = conf?.acme?.status ? undefined : this.statuses.get(id);
    if (cert || status) this.write(id, signature, { cert, status });
  }

  private orderOf(conf: SslConf): OrderConf | string {
    const acme = conf.acme!;
    const names: string[] = [];
    for (const sni of conf.snis ?? (conf.sni !== undefined ? [conf.sni] : [])) {
      const err = addIdentifier(names, sni.replace(/\.$/, '').toLowerCase());
      if (err) return `invalid sni: ${err}`;
    }
    if (!names.length) return 'no identifiers in "snis"';
    const pick = (name: string): IssuerConf | string => this.o.issuers.get(name) ?? `issuer "${name}" is missing from gatehouse.acme.issuers`;
    const all = [acme.issuer, ...(acme.fallback ?? [])].map(pick);
    const missing = all.find((i): i is string => typeof i === 'string');
    if (missing) return missing;
    const [issuer, ...fallbacks] = all as IssuerConf[];
    const key = keySpecOf(acme.key);
    return { issuer, fallbacks, names, key, id: `ssl-${conf.id}-${orderId(names, key)}` };
  }

  /** Where one object's certificate is: the object itself (as the data plane has it), or the one just installed. */
  private home(id: string, signature: string): CertificateHome {
    return {
      current: (order) => {
        const conf = this.latest.get(id);
        const inObject = conf?.cert && typeof conf.key === 'string' && conf.key.startsWith('---') ? { certPem: conf.cert, keyPem: conf.key } : undefined;
        const mine = this.issued.get(id);
        if (mine && certificateFits(mine, order.names) && (!inObject || inObject.certPem !== mine.certPem)) return mine;
        if (inObject) return inObject;
        // the object lost its certificate (PUT again without it): the one kept in state_path goes back in
        const stored = storedCertificate(order);
        if (!stored) return undefined;
        this.issued.set(id, stored.cert);
        this.write(id, signature, { cert: stored.cert });
        return stored.cert;
      },
      install: async (order, issuer, cert, log) => {
        try {
          storeCertificate(order, issuer, cert);
        } catch (err) {
          log.error(`acme: cannot save certificate "${order.id}" in "${issuer.statePath}": ${(err as Error).message}`);
        }
        this.issued.set(id, cert);
        await this.write(id, signature, { cert });
      },
      solver: (issuer, solver) => this.challenges.wrap(issuer, solver),
      status: (_order, status) => {
        this.statuses.set(id, status);
        void this.write(id, signature, { status });
      },
    };
  }

  /** Queues a write of the certificate and/or status into the object (after the ones before it). */
  private write(id: string, signature: string, patch: { cert?: RuntimeCertificate; status?: CertificateStatus }): Promise<void> {
    const next = (this.writes.get(id) ?? Promise.resolve()).then(() => this.apply(id, signature, patch)).catch((err: Error) => {
      this.o.log.error(`acme: cannot write SSL object "${id}" to the store: ${err.message}`);
    });
    this.writes.set(id, next);
    return next;
  }

  /**
   * Read, change, compare-and-swap: a user's change made in between wins
   * (the write is tried again on it, or dropped when the object now asks
   * for another certificate or is gone).
   */
  private async apply(id: string, signature: string, patch: { cert?: RuntimeCertificate; status?: CertificateStatus }): Promise<void> {
    const key = `${this.o.keyPrefix}/ssls/${id}`;
    for (let attempt = 0; attempt < 5; attempt++) {
      const kv = await this.o.store.get(key);
      if (!kv) return;
      const v = JSON.parse(kv.value) as Record<string, unknown> & { acme?: Record<string, unknown> };
      if (!v.acme || signatureOf({ ...(v as unknown as SslConf), id }) !== signature) return;
      let changed = false;
      if (patch.cert) {
        v.cert = patch.cert.certPem;
        v.key = this.o.keyring ? this.o.keyring.encrypt(patch.cert.keyPem) : patch.cert.keyPem;
        changed = true;
      }
      if (patch.status) {
        const status = statusJson(patch.status);
        if (JSON.stringify(v.acme.status) !== JSON.stringify(status)) {
          v.acme = { ...v.acme, status };
          changed = true;
        }
      }
      if (!changed) return;
      v.update_time = Math.floor(Date.now() / 1000);
      const r = await this.o.store.put(key, JSON.stringify(v), { expectRevision: kv.modRevision });
      if (r.ok) return;
    }
    throw new Error('the object kept changing');
  }
}
