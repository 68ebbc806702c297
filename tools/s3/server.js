#!/usr/bin/env node
// S3-protocol test server for moerl's store tests and `moerl bench store`: @20minutes/s3rver
// 4.0.4 (verifies SigV4 header signatures with the dummy key pair S3RVER/S3RVER) on 127.0.0.1,
// plus the three S3 operations s3rver lacks, added here so moerl's client can be tested over
// real signed HTTP: conditional PUT (If-None-Match: *), AbortMultipartUpload and
// ListMultipartUploads. Those three follow the S3 API reference; everything else is s3rver's,
// except one fix: an object appears only once its whole body has arrived (s3rver writes in
// place, so a client killed mid-PUT left a truncated object that listings and GETs served).
//
//   node --openssl-legacy-provider tools/s3/server.js --port 0 --dir /tmp/s3data --bucket moerl-test
// (s3rver encrypts ListObjectsV2 continuation tokens with DES, which Node >= 17 only offers
// with the legacy OpenSSL provider: without it every truncated listing answers 500.)
//   -> prints "S3_TEST_SERVER_PORT=<port>" once listening; exits when stdin closes or on SIGTERM.
'use strict';

const fs = require('fs');
const crypto = require('crypto');
const path = require('path');
const S3rver = require('@20minutes/s3rver');
const S3Error = require('@20minutes/s3rver/lib/models/error');
const objectCtrl = require('@20minutes/s3rver/lib/controllers/object');
const FilesystemStore = require('@20minutes/s3rver/lib/stores/filesystem');
const { pipeline, Transform } = require('stream');

function parseArgs(argv) {
  const opts = { port: 0, dir: null, buckets: [], serviceEndpoint: 'localhost' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--port') opts.port = Number(next());
    else if (a === '--dir') opts.dir = next();
    else if (a === '--bucket') opts.buckets.push(next());
    else if (a === '--service-endpoint') opts.serviceEndpoint = next();
    else throw new Error(`unknown argument ${a} (expected --port N --dir DIR --bucket NAME...)`);
  }
  if (!opts.dir) throw new Error('--dir DIR is required');
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) {
    throw new Error(`--port ${opts.port} is not a port number`);
  }
  return opts;
}

// Writes an object's body to a temporary file next to it and renames it into place once the
// body is complete, as S3 does (a PUT is all or nothing); an aborted upload leaves nothing.
// The temporary name does not end in s3rver's object suffix, so listings never see it.
FilesystemStore.prototype.putContent = function putContent(objectPath, content) {
  const partial = `${objectPath}.partial-${process.pid}-${crypto.randomBytes(6).toString('hex')}`;
  const md5 = crypto.createHash('md5');
  let size = 0;
  const source = Buffer.isBuffer(content) ? require('stream').Readable.from([content]) : content;
  const meter = new Transform({
    transform(chunk, encoding, callback) {
      md5.update(chunk, encoding);
      size += chunk.length;
      callback(null, chunk);
    },
  });
  return new Promise((resolve, reject) => {
    pipeline(source, meter, fs.createWriteStream(partial), (err) => (err ? reject(err) : resolve()));
  }).then(
    async () => {
      await fs.promises.rename(partial, objectPath);
      return [size, md5.digest('hex')];
    },
    async (err) => {
      await fs.promises.rm(partial, { force: true });
      throw err;
    },
  );
};

// Per-key promise chain: a conditional create checks and writes without another write to
// the same key in between (Node interleaves async file operations).
const keyLocks = new Map();
async function withKeyLock(id, fn) {
  const prev = keyLocks.get(id) || Promise.resolve();
  let release;
  const mine = new Promise((r) => (release = r));
  const chained = prev.then(() => mine);
  keyLocks.set(id, chained);
  await prev;
  try {
    return await fn();
  } finally {
    release();
    if (keyLocks.get(id) === chained) keyLocks.delete(id);
  }
}

async function checkIfNoneMatch(ctx, bucket, key) {
  const cond = ctx.headers['if-none-match'];
  if (cond === undefined) return;
  if (cond.trim() !== '*') {
    throw new S3Error('NotImplemented', 'If-None-Match on writes accepts only *', {
      Header: 'If-None-Match',
    });
  }
  if (await ctx.store.existsObject(bucket, key)) {
    throw new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', {
      Condition: 'If-None-Match',
    });
  }
}

const originalPut = objectCtrl.putObject;
objectCtrl.putObject = (ctx) =>
  withKeyLock(`${ctx.params.bucket}/${ctx.params.key}`, async () => {
    await checkIfNoneMatch(ctx, ctx.params.bucket, ctx.params.key);
    return originalPut(ctx);
  });

const originalComplete = objectCtrl.completeMultipartUpload;
objectCtrl.completeMultipartUpload = (ctx) =>
  withKeyLock(`${ctx.params.bucket}/${ctx.params.key}`, async () => {
    await checkIfNoneMatch(ctx, ctx.params.bucket, ctx.params.key);
    if (!fs.existsSync(uploadDir(ctx.store, ctx.params.bucket, ctx.query.uploadId))) {
      throw new S3Error('NoSuchUpload', 'The specified upload does not exist.', {
        UploadId: ctx.query.uploadId,
      });
    }
    return originalComplete(ctx);
  });

function uploadsRoot(store, bucket) {
  return store.getResourcePath(bucket, undefined, 'uploads');
}
function uploadDir(store, bucket, uploadId) {
  if (!/^[0-9a-f]+$/.test(String(uploadId))) return path.join('/nonexistent', 'x');
  return path.join(uploadsRoot(store, bucket), String(uploadId));
}

function bucketAndKey(ctx) {
  const parts = ctx.path.split('/').slice(1);
  return { bucket: decodeURIComponent(parts[0] || ''), key: parts.slice(1).map(decodeURIComponent).join('/') };
}

// AbortMultipartUpload: DELETE /bucket/key?uploadId=ID -> 204, or 404 NoSuchUpload.
async function abortUpload(ctx) {
  const { bucket } = bucketAndKey(ctx);
  const dir = uploadDir(ctx.store, bucket, ctx.query.uploadId);
  if (!fs.existsSync(dir)) {
    throw new S3Error('NoSuchUpload', 'The specified upload does not exist.', {
      UploadId: ctx.query.uploadId,
    });
  }
  await fs.promises.rm(dir, { recursive: true, force: true });
  ctx.status = 204;
  ctx.body = null;
}

// ListMultipartUploads: GET /bucket?uploads[&prefix=P] -> every pending upload in one page.
async function listUploads(ctx) {
  const { bucket } = bucketAndKey(ctx);
  const prefix = ctx.query.prefix || '';
  const root = uploadsRoot(ctx.store, bucket);
  const uploads = [];
  const ids = fs.existsSync(root) ? await fs.promises.readdir(root) : [];
  for (const id of ids) {
    const keyFile = path.join(root, id, 'key');
    if (!fs.existsSync(keyFile)) continue;
    const key = (await fs.promises.readFile(keyFile)).toString();
    if (!key.startsWith(prefix)) continue;
    const st = await fs.promises.stat(keyFile);
    uploads.push({ Key: key, UploadId: id, Initiated: st.mtime.toISOString(), StorageClass: 'STANDARD' });
  }
  uploads.sort((a, b) => (a.Key < b.Key ? -1 : a.Key > b.Key ? 1 : a.UploadId < b.UploadId ? -1 : 1));
  const result = { Bucket: bucket, Prefix: prefix, MaxUploads: 1000, IsTruncated: false };
  if (uploads.length) result.Upload = uploads;
  ctx.body = { ListMultipartUploadsResult: result };
}

// Runs after s3rver's authentication and bucket checks: s3rver answers these two requests
// with MethodNotAllowed / NotImplemented only once the signature has been verified.
async function missingOperations(ctx, next) {
  try {
    await next();
  } catch (err) {
    if (ctx.method === 'DELETE' && 'uploadId' in ctx.query && err.code === 'MethodNotAllowed') {
      return abortUpload(ctx);
    }
    if (ctx.method === 'GET' && 'uploads' in ctx.query && err.code === 'NotImplemented') {
      return listUploads(ctx);
    }
    throw err;
  }
}

function checkDes() {
  try {
    require('crypto').createCipheriv('des', Buffer.alloc(8), Buffer.alloc(8));
  } catch (err) {
    throw new Error('DES is unavailable (needed by s3rver for list continuation tokens): run node --openssl-legacy-provider');
  }
}

async function main() {
  checkDes();
  const opts = parseArgs(process.argv.slice(2));
  fs.mkdirSync(opts.dir, { recursive: true });
  const server = new S3rver({
    address: '127.0.0.1',
    port: opts.port,
    directory: opts.dir,
    silent: true,
    serviceEndpoint: opts.serviceEndpoint,
    allowMismatchedSignatures: false,
    configureBuckets: opts.buckets.map((name) => ({ name })),
  });
  // Insert just before the router (the last middleware), inside s3rver's XML encoder.
  server.middleware.splice(server.middleware.length - 1, 0, missingOperations);
  const addr = await server.run();
  process.stdout.write(`S3_TEST_SERVER_PORT=${addr.port}\n`);
  const stop = () => server.close().finally(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdin.on('end', stop);
  process.stdin.on('error', stop);
  process.stdin.resume();
}

main().catch((err) => {
  process.stderr.write(`s3 test server: ${err.message}\n`);
  process.exit(2);
});
