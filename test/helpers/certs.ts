/**
 * A CA, a server certificate for 127.0.0.1 and client certificates, made
 * at test time with the openssl binary, in a temp dir.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Pki {
  dir: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** A client certificate from another CA, which the server must refuse. */
  rogueCert: string;
  rogueKey: string;
  read(path: string): string;
  dispose(): void;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

/** openssl req's arguments for a new P-256 key, unencrypted, written to `name`.key. */
const newKey = (name: string) => ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${name}.key`];

/** A self-signed certificate `name`.crt and its key in `dir`: a CA, or with `extensions` (-addext) a server's own. */
export function selfSigned(dir: string, name: string, extensions: string[] = []): void {
  openssl(dir, [
    'req',
    '-x509',
    ...newKey(name),
    '-out',
    `${name}.crt`,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    ...extensions.flatMap((extension) => ['-addext', extension]),
  ]);
}

function leaf(dir: string, name: string, caName: string, extensions: string): void {
  writeFileSync(join(dir, `${name}.ext`), extensions);
  openssl(dir, ['req', ...newKey(name), '-out', `${name}.csr`, '-subj', `/CN=${name}`]);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${caName}.crt`,
    '-CAkey',
    `${caName}.key`,
    '-CAcreateserial',
    '-out',
    `${name}.crt`,
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
  ]);
}

export function makePki(): Pki {
  const dir = mkdtempSync(join(tmpdir(), 'miniapp-pki-'));
  selfSigned(dir, 'ca');
  selfSigned(dir, 'rogue-ca');
  leaf(dir, 'server', 'ca', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  leaf(dir, 'client', 'ca', 'extendedKeyUsage=clientAuth\n');
  leaf(dir, 'rogue', 'rogue-ca', 'extendedKeyUsage=clientAuth\n');
  const path = (file: string) => join(dir, file);
  return {
    dir,
    caCert: path('ca.crt'),
    serverCert: path('server.crt'),
    serverKey: path('server.key'),
    clientCert: path('client.crt'),
    clientKey: path('client.key'),
    rogueCert: path('rogue.crt'),
    rogueKey: path('rogue.key'),
    read: (file) => readFileSync(file, 'utf8'),
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}
