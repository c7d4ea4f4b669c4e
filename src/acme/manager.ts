/**
 * The certificates' lifecycle, run by one worker (worker 0, as nginx-acme
 * runs its task in one worker): each order is issued when it has no usable
 * certificate, and renewed at ⅔ of its lifetime (½ for certificates of 10
 * days or less) ± 2 % of the lifetime, as nginx-acme schedules it, or
 * in the window the CA suggests through its renewal information (RFC 9773,
 * renewal-info.ts), the new order naming the certificate it replaces. A failed
 * order is retried after 1 min, 10 min, 100 min, then daily (± 2 %), or
 * later when the CA's Retry-After says so. What it obtains goes to the
 * state path and to the run-time certificate registry, from which every
 * worker serves it at its next handshake (or, for the gateway's SSL objects,
 * wherever the manager's CertificateHome puts it). A reload stops this manager and
 * starts the next one, which finds the valid certificates and only
 * schedules their renewal; an order under way is finished, not placed
 * again.
 */
import type crypto from 'node:crypto';
import fs from 'node:fs';
import type { ErrorLog } from '../core/error-log.ts';
import type { SharedDocument } from '../core/shared-document.ts';
import { runtimeCertificate, setRuntimeCertificate } from '../tls/certificate-registry.ts';
import type { RuntimeCertificate } from '../tls/certificate-registry.ts';
import { AcmeClient, AcmeError } from './client.ts';
import { generateKey } from './jws.ts';
import { orderCertificate } from './order.ts';
import { dns01Solver } from './solvers/dns-01.ts';
import { dnsResponderSolver } from './solvers/dns-responder.ts';
import { http01Solver } from './solvers/http-01.ts';
import { tlsAlpn01Solver } from './solvers/tls-alpn-01.ts';
import type { Solver } from './solvers/solver.ts';
import { accountKey, certificateFits, storeCertificate, storedCertificate } from './state.ts';
import { certId, fetchRenewalInfo } from './renewal-info.ts';
import { setCertificateStatus } from './status.ts';
import type { CertificateStatus } from './status.ts';
import type { IssuerConf, OrderConf } from './state.ts';

const RETRY_MS = [60_000, 600_000, 6_000_000, 86_400_000];
const DAY = 86_400_000;
/** setTimeout's limit; longer waits are taken in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Orders under way in this thread, by certificate. */
const ordering = new Map<string, Promise<void>>();

/**
 * Where an order's certificate is served from, kept and reported: for
 * nginx's `acme_certificate` the run-time certificate registry, the
 * issuer's state_path and the shared zone's status (registryHome); for
 * the gateway, an SSL object in the store (src/gateway/acme/).
 */
export interface CertificateHome {
  /** The certificate served now for the order, if any (fitness is checked by the manager). */
  current(order: OrderConf): RuntimeCertificate | undefined;
  /** Serves and keeps a certificate just issued by `issuer`. */
  install(order: OrderConf, issuer: IssuerConf, cert: RuntimeCertificate, log: ErrorLog): void | Promise<void>;
  /** Publishes the order's status (the manager logs the changes itself). */
  status(order: OrderConf, status: CertificateStatus): void;
  /** The solver to answer challenges with, given the issuer's own (the gateway shares answers with its other nodes). */
  solver?(issuer: IssuerConf, solver: Solver): Solver;
}

/** nginx's home: the TLS registry every worker serves from, state_path, the shared zone's status. */
export function registryHome(doc: SharedDocument): CertificateHome {
  return {
    current: (order) => runtimeCertificate(order.id),
    install(order, issuer, cert, log) {
      try {
        storeCertificate(order, issuer, cert);
      } catch (err) {
        log.error(`acme: cannot save certificate "${order.id}" in "${issuer.statePath}": ${(err as Error).message}`);
      }
      setRuntimeCertificate(order.id, cert);
    },
    status: (order, status) => setCertificateStatus(doc, order.id, status),
  };
}

/** One client per issuer, shared by the managers that order from it (one account lookup). */
const clients = new WeakMap<IssuerConf, AcmeClient>();

const iso = (ms: number): string => new Date(ms).toISOString();

function jitter(ms: number, span: number): number {
  return ms + (Math.random() * 2 - 1) * span;
}

/** When a certificate valid from `from` to `to` is renewed (nginx-acme's renewal window). */
export function renewalTime(from: number, to: number): number {
  const lifetime = to - from;
  const ratio = lifetime > 10 * DAY ? 2 / 3 : 1 / 2;
  return jitter(from + lifetime * ratio, lifetime * 0.02);
}

export class AcmeManager {
  private readonly orders: OrderConf[];
  private readonly doc: SharedDocument;
  private readonly log: ErrorLog;
  private stopped = false;
  private readonly timers = new Map<OrderConf, NodeJS.Timeout>();
  private readonly renewAt = new Map<OrderConf, number>();
  /** Which issuer the certificate served for an order came from. */
  private readonly issuers = new Map<OrderConf, IssuerConf>();
  private readonly failures = new Map<OrderConf, number>();
  private readonly home: CertificateHome;

  /** `doc`: the shared zone the challenge answers go to; `home`: where certificates go (default: nginx's registry). */
  constructor(orders: OrderConf[], doc: SharedDocument, log: ErrorLog, home: CertificateHome = registryHome(doc)) {
    this.orders = orders;
    this.doc = doc;
    this.log = log;
    this.home = home;
  }

  start(): void {
    for (const order of this.orders) {
      const leaf = this.currentLeaf(order);
      if (leaf) {
        this.serving(order, leaf, 'is');
      } else {
        this.log.error(`acme: no certificate for "${order.names.join(' ')}" from issuer "${order.issuer.name}" yet, serving a self-signed placeholder until it is issued`);
        this.status(order, { state: 'pending' });
        this.schedule(order, 0, 'order');
      }
    }
  }

  /** A valid certificate is served: log it, publish its status, schedule its renewal (asking the CA's renewal information first). */
  private serving(order: OrderConf, leaf: crypto.X509Certificate, verb: 'is' | 'issued'): void {
    const from = Date.parse(leaf.validFrom);
    const to = Date.parse(leaf.validTo);
    const renew = renewalTime(from, to);
    const what = verb === 'is' ? 'is valid' : `issued by "${this.issuedBy(order).name}", valid`;
    this.log.notice(`acme: certificate "${order.id}" ${what} until ${new Date(to).toISOString()}, renewal at ${new Date(renew).toISOString()}`);
    this.status(order, { state: 'valid', notBefore: iso(from), notAfter: iso(to), renewAt: iso(renew) });
    this.renewAt.set(order, renew);
    this.schedule(order, 0, 'renewal-info');
  }

  /**
   * RFC 9773: when the CA has renewal information, a random point of its
   * suggested window replaces the ⅔ rule; asked again after its
   * Retry-After. Without it (or when it cannot be had) the certificate
   * renews at the time set when it was installed.
   */
  private async checkRenewalInfo(order: OrderConf): Promise<void> {
    const fallback = this.renewAt.get(order) ?? Date.now();
    const leaf = this.currentLeaf(order);
    if (!leaf) return this.schedule(order, 0, 'order');
    try {
      const client = this.client(this.issuedBy(order));
      const dir = await client.directory();
      const id = certId(leaf);
      if (!dir.renewalInfo || !id) return this.schedule(order, fallback - Date.now(), 'order');
      const info = await fetchRenewalInfo(client, dir.renewalInfo, id);
      if (this.stopped) return;
      const at = info.start + Math.random() * (info.end - info.start);
      this.renewAt.set(order, at);
      this.log.notice(`acme: renewal information for "${order.id}": window ${iso(info.start)} to ${iso(info.end)}, renewal at ${iso(Math.max(at, Date.now()))}`);
      this.status(order, { state: 'valid', notBefore: iso(Date.parse(leaf.validFrom)), notAfter: iso(Date.parse(leaf.validTo)), renewAt: iso(Math.max(at, Date.now())) });
      if (at <= Date.now() + info.pollMs) this.schedule(order, at - Date.now(), 'order');
      else this.schedule(order, info.pollMs, 'renewal-info');
    } catch (err) {
      if (this.stopped) return;
      this.log.warn(`acme: cannot get renewal information for "${order.id}" from issuer "${this.issuedBy(order).name}": ${(err as Error).message}`);
      this.schedule(order, fallback - Date.now(), 'order');
    }
  }

  private currentLeaf(order: OrderConf): crypto.X509Certificate | undefined {
    const current = this.home.current(order);
    const leaf = current && certificateFits(current, order.names);
    return leaf && Date.parse(leaf.validTo) > Date.now() ? leaf : undefined;
  }

  private status(order: OrderConf, s: Omit<CertificateStatus, 'issuer' | 'identifiers'>): void {
    try {
      this.home.status(order, { issuer: this.issuedBy(order).name, identifiers: order.names, ...s });
    } catch (err) {
      this.log.error(`acme: cannot record the status of "${order.id}": ${(err as Error).message}`);
    }
  }

  /**
   * Nothing more is scheduled; an order under way finishes and installs its
   * certificate (as good for the next configuration, whose manager waits
   * for it instead of ordering again).
   */
  stop(): void {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }

  /** The order's next step (one at a time): an order, or asking the renewal information. */
  private schedule(order: OrderConf, delay: number, step: 'order' | 'renewal-info'): void {
    if (this.stopped) return;
    clearTimeout(this.timers.get(order));
    const at = Date.now() + Math.max(0, delay);
    const arm = () => {
      const left = at - Date.now();
      const t = setTimeout(() => {
        this.timers.delete(order);
        if (left > MAX_TIMER_MS) arm();
        else if (step === 'order') void this.run(order);
        else void this.checkRenewalInfo(order);
      }, Math.min(Math.max(0, left), MAX_TIMER_MS));
      t.unref();
      this.timers.set(order, t);
    };
    arm();
  }

  private client(issuer: IssuerConf): AcmeClient {
    let c = clients.get(issuer);
    if (!c) {
      const trusted = issuer.trustedCertificate ? fs.readFileSync(issuer.trustedCertificate, 'latin1') : undefined;
      c = new AcmeClient({
        uri: issuer.uri, trusted, verify: issuer.verify, contacts: issuer.contacts,
        eab: issuer.eab, acceptTos: issuer.acceptTos, profile: issuer.profile, resolve: issuer.resolve,
      }, accountKey(issuer));
      clients.set(issuer, c);
    }
    return c;
  }

  /** One order at a time per certificate in this thread, across reloads: a later manager waits for the one under way. */
  private async run(order: OrderConf): Promise<void> {
    const prior = ordering.get(order.id);
    if (prior) {
      await prior;
      const leaf = this.currentLeaf(order);
      if (this.stopped) return;
      if (leaf) return this.serving(order, leaf, 'is');
    }
    const work = this.attempt(order);
    ordering.set(order.id, work);
    try {
      await work;
    } finally {
      if (ordering.get(order.id) === work) ordering.delete(order.id);
    }
  }

  /** Orders from the issuer, then from each fallback in turn; all failing, the next attempt is backed off. */
  private async attempt(order: OrderConf): Promise<void> {
    const issuers = [order.issuer, ...order.fallbacks];
    let last: Error | undefined;
    for (const [i, issuer] of issuers.entries()) {
      try {
        await this.orderFrom(order, issuer);
        return;
      } catch (err) {
        last = err as Error;
        const next = issuers[i + 1];
        if (next) this.log.error(`acme: cannot obtain certificate "${order.id}" from issuer "${issuer.name}": ${last.message}; trying issuer "${next.name}"`);
      }
    }
    const n = this.failures.get(order) ?? 0;
    this.failures.set(order, n + 1);
    const base = RETRY_MS[Math.min(n, RETRY_MS.length - 1)];
    const delay = Math.max(jitter(base, base * 0.02), (last as AcmeError).retryAfter ?? 0);
    const message = last!.message;
    this.log.error(`acme: cannot obtain certificate "${order.id}" from issuer "${issuers[issuers.length - 1].name}": ${message}; next attempt in ${Math.round(delay / 1000)}s`);
    // a certificate still valid keeps being served while its renewal fails
    const leaf = this.currentLeaf(order);
    const validity = leaf ? { notBefore: iso(Date.parse(leaf.validFrom)), notAfter: iso(Date.parse(leaf.validTo)) } : {};
    this.status(order, { state: 'failing', ...validity, nextAttempt: iso(Date.now() + delay), lastError: message, lastErrorAt: iso(Date.now()) });
    this.schedule(order, delay, 'order');
  }

  private async orderFrom(order: OrderConf, issuer: IssuerConf): Promise<void> {
    const client = this.client(issuer);
    const own = issuer.challenge === 'tls-alpn-01' ? tlsAlpn01Solver()
      : issuer.challenge === 'dns-01' ? (issuer.dnsHook ? dns01Solver(issuer.dnsHook) : dnsResponderSolver(this.doc))
        : http01Solver(this.doc);
    const solver = this.home.solver?.(issuer, own) ?? own;
    const renewing = this.currentLeaf(order);
    const options = {
      commonName: issuer.commonNameInCsr, preferredChain: issuer.preferredChain, notice: (m: string) => this.log.notice(m),
      replaces: renewing && this.issuedBy(order) === issuer ? certId(renewing) : undefined,
    };
    const cert = await orderCertificate(client, order.names, () => generateKey(order.key), solver, options);
    const leaf = certificateFits(cert, order.names);
    if (!leaf) throw new AcmeError('the issued certificate does not cover the names or match the key');
    await this.home.install(order, issuer, cert, this.log);
    this.failures.delete(order);
    this.issuers.set(order, issuer);
    this.serving(order, leaf, 'issued');
  }

  /** The issuer of the certificate served now (the first whose state_path holds it, at start). */
  private issuedBy(order: OrderConf): IssuerConf {
    let issuer = this.issuers.get(order);
    if (!issuer) this.issuers.set(order, (issuer = storedCertificate(order)?.issuer ?? order.issuer));
    return issuer;
  }
}
