// kafkajs driven from Odradek's compat tests.
//
// Usage: node driver.js COMMAND BOOTSTRAP < request.json
// The request is one JSON object; the answer is one JSON line on stdout:
// {"ok": true, ...} or {"ok": false, "error": {"name", "type", "message"}}.
// Keys, values and header values travel as base64 strings, null for null.
//
// kafkajs ships gzip only; snappy comes from kafkajs-snappy, and lz4 and zstd use small
// codec adapters here around pure-JS/WASM libraries (lz4js for LZ4 blocks inside the
// frame format Kafka specifies; zstd-codec: an Emscripten build of libzstd), so nothing
// needs a compiler.
'use strict';

const { CompressionTypes, CompressionCodecs } = require('kafkajs');
const SnappyCodec = require('kafkajs-snappy');
const lz4js = require('lz4js');
const xxh32 = require('lz4js/xxh32');
const { ZstdCodec } = require('zstd-codec');
const { serve } = require('./protocol');

// An LZ4 frame with independent 64 KiB blocks, as the Java client writes it: Kafka's
// own reader rejects dependent blocks, which is all lz4js.compress() produces.
const LZ4_BLOCK = 64 * 1024;
function lz4Frame(src) {
  const header = Buffer.from([0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0]); // FLG: v1, B.Indep
  header[6] = (xxh32.hash(0, header, 4, 2) >> 8) & 0xff;
  const parts = [header];
  const scratch = lz4js.makeBuffer(lz4js.compressBound(LZ4_BLOCK));
  for (let pos = 0; pos < src.length; pos += LZ4_BLOCK) {
    const n = Math.min(LZ4_BLOCK, src.length - pos);
    const size = lz4js.compressBlock(src, scratch, pos, n, new Uint32Array(1 << 16));
    const sizeField = Buffer.alloc(4);
    if (size === 0 || size >= n) {
      sizeField.writeUInt32LE((0x80000000 | n) >>> 0);
      parts.push(sizeField, Buffer.from(src.subarray(pos, pos + n)));
    } else {
      sizeField.writeUInt32LE(size);
      parts.push(sizeField, Buffer.from(scratch.subarray(0, size)));
    }
  }
  parts.push(Buffer.alloc(4)); // end mark
  return Buffer.concat(parts);
}

// Reading any LZ4 frame: lz4js.decompress() misreads frames with block checksums
// (python-lz4 writes them), so the frame is walked here and lz4js only decodes blocks.
const LZ4_MAGIC = 0x184d2204;
const LZ4_BLOCK_SIZES = { 4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20 };
function lz4Unframe(src) {
  if (src.readUInt32LE(0) !== LZ4_MAGIC) {
    throw new Error('not an LZ4 frame');
  }
  const flg = src[4];
  const maxBlock = LZ4_BLOCK_SIZES[(src[5] >> 4) & 7];
  if ((flg & 0xc0) !== 0x40 || maxBlock === undefined) {
    throw new Error('unsupported LZ4 frame descriptor');
  }
  const blockChecksum = (flg & 0x10) !== 0;
  const start = 4 + 2 + (flg & 0x08 ? 8 : 0) + (flg & 0x01 ? 4 : 0) + 1; // + content size, dict id, HC
  // First pass: where the blocks are, so one output buffer keeps the history that
  // dependent blocks refer back to.
  const blocks = [];
  for (let pos = start; ; ) {
    const size = src.readUInt32LE(pos);
    pos += 4;
    if (size === 0) {
      break;
    }
    const n = (size & 0x7fffffff) >>> 0;
    blocks.push({ pos, n, raw: (size & 0x80000000) !== 0 });
    pos += n + (blockChecksum ? 4 : 0);
  }
  const out = lz4js.makeBuffer(blocks.length * maxBlock);
  let end = 0;
  for (const b of blocks) {
    if (b.raw) {
      out.set(src.subarray(b.pos, b.pos + b.n), end);
      end += b.n;
    } else {
      end = lz4js.decompressBlock(src, out, b.pos, b.n, end);
    }
  }
  return Buffer.from(out.buffer, out.byteOffset, end);
}

const LZ4Codec = () => ({
  async compress(encoder) {
    return lz4Frame(encoder.buffer);
  },
  async decompress(buffer) {
    return lz4Unframe(buffer);
  },
});

let zstdReady = null;
function zstd() {
  if (zstdReady === null) {
    zstdReady = new Promise((resolve) => ZstdCodec.run((z) => resolve(z)));
  }
  return zstdReady;
}

const ZstdKafkaCodec = () => ({
  async compress(encoder) {
    const z = await zstd();
    return Buffer.from(new z.Simple().compress(encoder.buffer, 3));
  },
  async decompress(buffer) {
    // Streaming decompression: producers that write frames without a content size
    // (the Java client's ZstdOutputStream) are readable too.
    const z = await zstd();
    return Buffer.from(new z.Streaming().decompress(buffer));
  },
});

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec;
CompressionCodecs[CompressionTypes.LZ4] = LZ4Codec;
CompressionCodecs[CompressionTypes.ZSTD] = ZstdKafkaCodec;

const COMPRESSION = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
};

const unb64 = (s) => (s === null || s === undefined ? null : Buffer.from(s, 'base64'));
const b64 = (b) => (b === null || b === undefined ? null : Buffer.from(b).toString('base64'));

// kafkajs takes headers as an object; a repeated name becomes an array of values.
function decodeHeaders(headers) {
  const out = {};
  for (const [name, value] of headers || []) {
    if (name in out) {
      out[name] = [].concat(out[name], [unb64(value)]);
    } else {
      out[name] = unb64(value);
    }
  }
  return out;
}

function encodeHeaders(headers) {
  const out = [];
  for (const [name, value] of Object.entries(headers || {})) {
    const values = Array.isArray(value) ? value : [value];
    for (const v of values) {
      out.push([name, b64(v)]);
    }
  }
  return out;
}

async function produce(kafka, req) {
  const producer = kafka.producer({
    idempotent: Boolean(req.idempotent),
    maxInFlightRequests: req.idempotent ? 1 : undefined,
    allowAutoTopicCreation: req.allowAutoTopicCreation !== false,
  });
  await producer.connect();
  try {
    const messages = req.messages.map((m) => ({
      key: unb64(m.key),
      value: unb64(m.value),
      headers: decodeHeaders(m.headers),
      partition: m.partition,
      timestamp: m.timestamp === undefined || m.timestamp === null ? undefined : String(m.timestamp),
    }));
    const acks = req.acks === undefined ? -1 : req.acks;
    const result = await producer.send({
      topic: req.topic,
      messages,
      acks,
      compression: COMPRESSION[req.compression || 'none'],
      timeout: 30000,
    });
    return { ok: true, result };
  } finally {
    await producer.disconnect();
  }
}

// One transactional producer: each of req.transactions ({messages, commit}) in its own
// transaction, committed or aborted.
async function txnProduce(kafka, req) {
  const producer = kafka.producer({
    transactionalId: req.transactionalId,
    idempotent: true,
    maxInFlightRequests: 1,
    transactionTimeout: req.transactionTimeout || 60000,
  });
  await producer.connect();
  try {
    const done = [];
    for (const t of req.transactions) {
      const txn = await producer.transaction();
      try {
        const messages = t.messages.map((m) => ({
          key: unb64(m.key),
          value: unb64(m.value),
          headers: decodeHeaders(m.headers),
          partition: m.partition,
        }));
        if (messages.length) {
          await txn.send({ topic: req.topic, messages, acks: -1, timeout: 30000 });
        }
        if (t.commit) {
          await txn.commit();
        } else {
          await txn.abort();
        }
      } catch (e) {
        if (txn.isActive()) {
          await txn.abort();
        }
        throw e;
      }
      done.push(t.commit ? 'COMMIT' : 'ABORT');
    }
    return { ok: true, transactions: done };
  } finally {
    await producer.disconnect();
  }
}

// kafkajs reads committed data only unless readUncommitted (its default is READ_COMMITTED).
async function consume(kafka, req) {
  const consumer = kafka.consumer({
    groupId: req.groupId,
    sessionTimeout: 10000,
    readUncommitted: Boolean(req.readUncommitted),
  });
  const records = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [req.topic], fromBeginning: true });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`timed out with ${records.length} of ${req.count} records`)),
        req.timeoutMs || 30000,
      );
      consumer
        .run({
          eachMessage: async ({ partition, message }) => {
            records.push({
              partition,
              offset: Number(message.offset),
              timestamp: Number(message.timestamp),
              key: b64(message.key),
              value: b64(message.value),
              headers: encodeHeaders(message.headers),
            });
            if (records.length >= req.count) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
    return { ok: true, records };
  } finally {
    await consumer.disconnect();
  }
}

async function admin(kafka, command, req) {
  const a = kafka.admin();
  await a.connect();
  try {
    switch (command) {
      case 'create-topic': {
        const created = await a.createTopics({
          waitForLeaders: true,
          topics: [
            {
              topic: req.topic,
              numPartitions: req.partitions || 1,
              replicationFactor: req.replicationFactor || 1,
              configEntries: Object.entries(req.configs || {}).map(([name, value]) => ({
                name,
                value: String(value),
              })),
            },
          ],
        });
        return { ok: true, created };
      }
      case 'list-topics':
        return { ok: true, topics: await a.listTopics() };
      case 'describe-topic':
        return { ok: true, metadata: await a.fetchTopicMetadata({ topics: [req.topic] }) };
      case 'delete-topic':
        await a.deleteTopics({ topics: [req.topic], timeout: 30000 });
        return { ok: true };
      case 'create-partitions':
        await a.createPartitions({ topicPartitions: [{ topic: req.topic, count: req.total }] });
        return { ok: true };
      case 'describe-configs': {
        const d = await a.describeConfigs({
          includeSynonyms: true,
          resources: [{ type: 2, name: req.topic }],
        });
        return { ok: true, resources: d.resources };
      }
      case 'alter-configs':
        await a.alterConfigs({
          validateOnly: false,
          resources: [
            {
              type: 2,
              name: req.topic,
              configEntries: Object.entries(req.configs).map(([name, value]) => ({
                name,
                value: String(value),
              })),
            },
          ],
        });
        return { ok: true };
      case 'topic-offsets':
        return { ok: true, offsets: await a.fetchTopicOffsets(req.topic) };
      case 'offsets-by-timestamp':
        return {
          ok: true,
          offsets: await a.fetchTopicOffsetsByTimestamp(req.topic, req.timestamp),
        };
      case 'delete-records':
        // kafkajs looks the leader up in cached metadata without loading it first.
        await a.fetchTopicMetadata({ topics: [req.topic] });
        await a.deleteTopicRecords({
          topic: req.topic,
          partitions: [{ partition: req.partition, offset: String(req.offset) }],
        });
        return { ok: true };
      case 'describe-cluster':
        return { ok: true, cluster: await a.describeCluster() };
      default:
        throw new Error(`unknown command ${command}`);
    }
  } finally {
    await a.disconnect();
  }
}

async function handle(kafka, command, req) {
  if (command === 'produce') {
    return produce(kafka, req);
  } else if (command === 'txn-produce') {
    return txnProduce(kafka, req);
  } else if (command === 'consume') {
    return consume(kafka, req);
  }
  return admin(kafka, command, req);
}

serve('odradek-compat-kafkajs', (req) => (req.retries === undefined ? 3 : req.retries), handle);
