/**
 * The native peers and load tools from Debian: found with `command -v`, installed with apt-get when
 * missing and running as root, otherwise reported with the command that installs them (their rows
 * are skipped). nginx, HAProxy and Caddy get their configuration written to a temporary folder.
 */
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { commandExists, runCommand, spawnProc, type Proc } from './proc.js';

/** Command → Debian package. */
export const TOOLS: Record<string, string> = {
  nginx: 'nginx-light',
  haproxy: 'haproxy',
  wrk: 'wrk',
  h2load: 'nghttp2-client',
  caddy: 'caddy',
};

export interface ToolStatus {
  found: Record<string, string | undefined>;
  /** What was done or what to do, for the report. */
  notes: string[];
}

export async function ensureTools(install: boolean, log: (line: string) => void): Promise<ToolStatus> {
  const found: Record<string, string | undefined> = {};
  for (const cmd of Object.keys(TOOLS)) found[cmd] = commandExists(cmd);
  const missing = Object.keys(TOOLS).filter((c) => !found[c]);
  const notes: string[] = [];
  if (missing.length === 0) return { found, notes };
  const packages = [...new Set(missing.map((c) => TOOLS[c]!))];
  const isRoot = process.getuid?.() === 0;
  if (install && isRoot) {
    log(`installing ${packages.join(' ')} (missing: ${missing.join(', ')})`);
    const update = await runCommand('apt-get', ['update'], { timeoutMs: 300_000 });
    const r = update.code === 0
      ? await runCommand('apt-get', ['install', '-y', '--no-install-recommends', ...packages], { timeoutMs: 600_000, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
      : update;
    if (r.code !== 0) notes.push(`apt-get failed (${r.code}): ${r.stderr.trim().split('\n').slice(-2).join(' ')}`);
    else notes.push(`installed with apt-get: ${packages.join(', ')}`);
    for (const cmd of missing) found[cmd] = commandExists(cmd);
  } else {
    const how = `sudo apt-get update && sudo apt-get install -y ${packages.join(' ')}`;
    notes.push(`missing ${missing.join(', ')}: ${isRoot ? 'installation turned off (--no-install)' : 'not root'}; install with: ${how}`);
    log(`missing ${missing.join(', ')}; their rows are skipped. Install with:\n  ${how}`);
  }
  return { found, notes };
}

export async function toolVersions(found: Record<string, string | undefined>): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const first = (s: string): string => s.trim().split('\n')[0] ?? '';
  if (found.nginx) out.nginx = first((await runCommand('nginx', ['-v'])).stderr).replace(/^nginx version: /, '');
  if (found.haproxy) out.haproxy = first((await runCommand('haproxy', ['-v'])).stdout).replace(/ - https:.*$/, '');
  if (found.wrk) out.wrk = first((await runCommand('wrk', ['--version'])).stdout).replace(/ Copyright.*$/, '');
  if (found.h2load) out.h2load = first((await runCommand('h2load', ['--version'])).stdout);
  if (found.caddy) out.caddy = first((await runCommand('caddy', ['version'])).stdout).replace(/ h1:.*$/, '');
  return out;
}

export interface NginxPorts {
  listen: number;
  /** h2c (prior knowledge) listener. */
  listenH2: number;
  upstream: number;
  /** An HTTPS listener (HTTP/1.1 over TLS 1.3) with this certificate and key (PEM files). */
  tls?: { listen: number; cert: string; key: string };
}

/**
 * One worker, upstream keep-alive (64 idle connections kept), no access log (svcproxy runs at
 * `--log-level warn`, which writes none either), request bodies streamed (`proxy_request_buffering
 * off`, as every other row streams), keep-alive request limits lifted on both sides (nginx
 * closes a connection after 1000 requests by default; no other row does). With `ports.tls`, an HTTPS
 * listener too: TLS 1.3 only, OpenSSL's default TLS 1.3 suites in the client's order (as Node's
 * `tls` server picks them), no session cache (tickets, nginx's default, stay on).
 */
export function nginxConfig(dir: string, ports: NginxPorts): string {
  const tmp = (name: string): string => {
    const p = path.join(dir, name);
    mkdirSync(p, { recursive: true });
    chmodSync(p, 0o777); // the worker runs as an unprivileged user when started by root
    return p;
  };
  chmodSync(dir, 0o755);
  const proxy = `
      proxy_pass http://u;
      proxy_http_version 1.1;
      proxy_set_header Connection "";`;
  const conf = `worker_processes 1;
daemon off;
pid ${path.join(dir, 'nginx.pid')};
error_log ${path.join(dir, 'error.log')} warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path ${tmp('client_body')};
  proxy_temp_path ${tmp('proxy')};
  fastcgi_temp_path ${tmp('fastcgi')};
  uwsgi_temp_path ${tmp('uwsgi')};
  scgi_temp_path ${tmp('scgi')};
  keepalive_timeout 65s;
  keepalive_requests 1000000;
  client_max_body_size 0;
  proxy_request_buffering off;
  upstream u {
    server 127.0.0.1:${ports.upstream};
    keepalive 64;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
  }
  map $http_upgrade $connection_upgrade { default upgrade; '' ''; }
  server {
    listen 127.0.0.1:${ports.listen};
    location / {${proxy}
    }
    location /ws {
      proxy_pass http://u;
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_read_timeout 1h;
    }
  }
  server {
    listen 127.0.0.1:${ports.listenH2} http2;
    location / {${proxy}
    }
  }${ports.tls ? `
  server {
    listen 127.0.0.1:${ports.tls.listen} ssl;
    ssl_certificate ${ports.tls.cert};
    ssl_certificate_key ${ports.tls.key};
    ssl_protocols TLSv1.3;
    location / {${proxy}
    }
  }` : ''}
}
`;
  const file = path.join(dir, 'nginx.conf');
  writeFileSync(file, conf);
  return file;
}

export function startNginx(dir: string, ports: NginxPorts, logDir: string): Proc {
  const file = nginxConfig(dir, ports);
  return spawnProc('nginx', 'nginx', ['-p', dir, '-c', file], { logDir });
}

/** One thread, `http-reuse always`, keep-alive both ways, an h2c (prior knowledge) bind. */
export function haproxyConfig(dir: string, ports: NginxPorts): string {
  const conf = `global
  nbthread 1
  maxconn 8000
defaults
  mode http
  timeout connect 5s
  timeout client 65s
  timeout server 65s
  timeout http-keep-alive 65s
  timeout tunnel 1h
  option http-keep-alive
  http-reuse always
frontend fe
  bind 127.0.0.1:${ports.listen}
  bind 127.0.0.1:${ports.listenH2} proto h2
  default_backend be
backend be
  server app 127.0.0.1:${ports.upstream}
`;
  const file = path.join(dir, 'haproxy.cfg');
  writeFileSync(file, conf);
  return file;
}

export function startHaproxy(dir: string, ports: NginxPorts, logDir: string): Proc {
  const file = haproxyConfig(dir, ports);
  return spawnProc('haproxy', 'haproxy', ['-db', '-f', file], { logDir });
}

/**
 * Caddy's `reverse_proxy` (its defaults: upstream keep-alive, no access log) on one OS thread for Go
 * code (GOMAXPROCS=1, as nginx and HAProxy get one worker), h1 and h2c on the same listener; no
 * admin endpoint and no automatic HTTPS, its data folders inside `dir`.
 */
export function caddyConfig(dir: string, ports: { listen: number; upstream: number }): string {
  const conf = `{
  admin off
  auto_https off
  servers {
    protocols h1 h2c
  }
}
http://127.0.0.1:${ports.listen} {
  reverse_proxy 127.0.0.1:${ports.upstream}
}
`;
  const file = path.join(dir, 'Caddyfile');
  writeFileSync(file, conf);
  return file;
}

export function startCaddy(dir: string, ports: { listen: number; upstream: number }, logDir: string): Proc {
  const file = caddyConfig(dir, ports);
  const env = { ...process.env, GOMAXPROCS: '1', XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir, HOME: dir };
  return spawnProc('caddy', 'caddy', ['run', '--config', file, '--adapter', 'caddyfile'], { logDir, env });
}
