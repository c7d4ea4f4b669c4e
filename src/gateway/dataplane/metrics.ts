/**
 * The prometheus plugin's metrics, as APISIX's exporter names them
 * (apisix/plugins/prometheus/exporter.lua): each worker counts its own
 * requests; the export endpoint asks every worker for its values
 * (worker-poll.ts), sums them and writes Prometheus' text format.
 */

/** Latency buckets in ms (APISIX's DEFAULT_BUCKETS, 1 ms to 60 s). */
export const DEFAULT_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000];

interface MetricDef { type: 'counter' | 'histogram' | 'gauge'; help: string; labels: string[] }

export const METRICS: Record<string, MetricDef> = {
  http_status: {
    type: 'counter', help: 'HTTP status codes per service in APISIX',
    labels: ['code', 'route', 'matched_uri', 'matched_host', 'service', 'consumer', 'node', 'request_type', 'request_llm_model', 'llm_model', 'response_source'],
  },
  http_latency: {
    type: 'histogram', help: 'HTTP request latency in milliseconds per service in APISIX',
    labels: ['type', 'route', 'service', 'consumer', 'node', 'request_type', 'request_llm_model', 'llm_model'],
  },
  bandwidth: {
    type: 'counter', help: 'Total bandwidth in bytes consumed per service in APISIX',
    labels: ['type', 'route', 'service', 'consumer', 'node', 'request_type', 'request_llm_model', 'llm_model'],
  },
};

/**
 * Label values joined into one key (a request counts under a key built by
 * string concatenation, not an array and JSON.stringify). The separator is
 * NUL, which no label value holds (ids, URIs, host names, addresses).
 */
export const LABEL_SEP = '\0';

/** One worker's values: metric name → label values (joined by LABEL_SEP) → value, or histogram counts. */
export interface MetricsSnapshot {
  counters: Record<string, Record<string, number>>;
  histograms: Record<string, Record<string, { buckets: number[]; sum: number; count: number }>>;
  /** Requests this worker read (nginx's total, for apisix_http_requests_total). */
  requests: number;
}

export class WorkerMetrics {
  private readonly counters = new Map<string, Map<string, number>>();
  private readonly histograms = new Map<string, Map<string, { buckets: number[]; sum: number; count: number }>>();
  requests = 0;

  inc(name: string, labels: string[], by: number): void {
    this.incKey(name, labels.join(LABEL_SEP), by);
  }

  observe(name: string, labels: string[], value: number): void {
    this.observeKey(name, labels.join(LABEL_SEP), value);
  }

  /** `inc` with the label values already joined by LABEL_SEP. */
  incKey(name: string, key: string, by: number): void {
    let m = this.counters.get(name);
    if (!m) this.counters.set(name, (m = new Map()));
    m.set(key, (m.get(key) ?? 0) + by);
  }

  /** `observe` with the label values already joined by LABEL_SEP. */
  observeKey(name: string, key: string, value: number): void {
    let m = this.histograms.get(name);
    if (!m) this.histograms.set(name, (m = new Map()));
    let h = m.get(key);
    if (!h) m.set(key, (h = { buckets: new Array<number>(DEFAULT_BUCKETS.length).fill(0), sum: 0, count: 0 }));
    for (let i = 0; i < DEFAULT_BUCKETS.length; i++) if (value <= DEFAULT_BUCKETS[i]) h.buckets[i]++;
    h.sum += value;
    h.count++;
  }

  snapshot(): MetricsSnapshot {
    const counters: MetricsSnapshot['counters'] = {};
    for (const [n, m] of this.counters) counters[n] = Object.fromEntries(m);
    const histograms: MetricsSnapshot['histograms'] = {};
    for (const [n, m] of this.histograms) histograms[n] = Object.fromEntries(m);
    return { counters, histograms, requests: this.requests };
  }
}

/** This worker's metrics (the plugin's log phase writes here). */
export const workerMetrics = new WorkerMetrics();

function escape(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function labelText(names: string[], values: string[], extra?: string): string {
  const parts = names.map((n, i) => `${n}="${escape(values[i] ?? '')}"`);
  if (extra !== undefined) parts.push(extra);
  return parts.length ? `{${parts.join(',')}}` : '';
}

/** Prometheus' text format for the workers' snapshots summed, with the node's own gauges. */
export function renderMetrics(prefix: string, snapshots: MetricsSnapshot[], node: { hostname: string; version: string }): string {
  const out: string[] = [];
  const head = (name: string, help: string, type: string) => { out.push(`# HELP ${prefix}${name} ${help}`, `# TYPE ${prefix}${name} ${type}`); };
  for (const [name, def] of Object.entries(METRICS)) {
    if (def.type === 'counter') {
      const sum = new Map<string, number>();
      for (const s of snapshots) for (const [k, v] of Object.entries(s.counters[name] ?? {})) sum.set(k, (sum.get(k) ?? 0) + v);
      if (!sum.size) continue;
      head(name, def.help, 'counter');
      for (const [k, v] of [...sum].sort()) out.push(`${prefix}${name}${labelText(def.labels, k.split(LABEL_SEP))} ${v}`);
    } else {
      const sum = new Map<string, { buckets: number[]; sum: number; count: number }>();
      for (const s of snapshots) {
        for (const [k, h] of Object.entries(s.histograms[name] ?? {})) {
          const t = sum.get(k);
          if (!t) { sum.set(k, { buckets: [...h.buckets], sum: h.sum, count: h.count }); continue; }
          h.buckets.forEach((b, i) => { t.buckets[i] += b; });
          t.sum += h.sum;
          t.count += h.count;
        }
      }
      if (!sum.size) continue;
      head(name, def.help, 'histogram');
      for (const [k, h] of [...sum].sort()) {
        const values = k.split(LABEL_SEP);
        DEFAULT_BUCKETS.forEach((b, i) => out.push(`${prefix}${name}_bucket${labelText(def.labels, values, `le="${b}"`)} ${h.buckets[i]}`));
        out.push(`${prefix}${name}_bucket${labelText(def.labels, values, 'le="+Inf"')} ${h.count}`);
        out.push(`${prefix}${name}_count${labelText(def.labels, values)} ${h.count}`);
        out.push(`${prefix}${name}_sum${labelText(def.labels, values)} ${h.sum}`);
      }
    }
  }
  head('http_requests_total', 'The total number of client requests since APISIX started', 'gauge');
  out.push(`${prefix}http_requests_total ${snapshots.reduce((n, s) => n + s.requests, 0)}`);
  head('node_info', 'Info of APISIX node', 'gauge');
  out.push(`${prefix}node_info{hostname="${escape(node.hostname)}",version="${escape(node.version)}"} 1`);
  return out.join('\n') + '\n';
}
