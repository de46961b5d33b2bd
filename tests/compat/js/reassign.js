// kafkajs's admin driving partition reassignments, for Odradek's compat tests.
//
// Usage: node reassign.js COMMAND BOOTSTRAP < request.json (the protocol of driver.js):
// one JSON object in, one JSON line out, {"ok": true, ...} or
// {"ok": false, "error": {"name", "type", "message"}}.
//   alter  {"topic", "partition", "replicas": [ids] | null}
//   list   {"topics": [{"topic", "partitions": [..]}] | null}
//   topic  {"topic"}: the partitions' replicas as the client's metadata shows them
'use strict';

const { Kafka, logLevel } = require('kafkajs');

async function run(kafka, command, req) {
  const admin = kafka.admin();
  await admin.connect();
  try {
    if (command === 'alter') {
      await admin.alterPartitionReassignments({
        topics: [
          {
            topic: req.topic,
            partitionAssignment: [{ partition: req.partition, replicas: req.replicas }],
          },
        ],
        timeout: 30000,
      });
      return { ok: true };
    }
    if (command === 'list') {
      const answer = await admin.listPartitionReassignments({
        topics: req.topics === undefined ? null : req.topics,
        timeout: 30000,
      });
      return { ok: true, topics: answer.topics };
    }
    if (command === 'topic') {
      const meta = await admin.fetchTopicMetadata({ topics: [req.topic] });
      const t = meta.topics[0];
      return {
        ok: true,
        partitions: t.partitions.map((p) => ({
          partition: p.partitionId,
          leader: p.leader,
          replicas: p.replicas,
          isr: p.isr,
        })),
      };
    }
    throw new Error(`unknown command ${command}`);
  } finally {
    await admin.disconnect();
  }
}

async function main() {
  const [command, bootstrap] = process.argv.slice(2);
  const chunks = [];
  for await (const chunk of process.stdin) {
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  const req = text ? JSON.parse(text) : {};
  const kafka = new Kafka({
    clientId: 'odradek-compat-reassign',
    brokers: bootstrap.split(','),
    logLevel: logLevel.ERROR,
    retry: { retries: 3 },
  });
  let answer;
  try {
    answer = await run(kafka, command, req);
  } catch (e) {
    const cause = e.originalError || e.cause || (e.errors && e.errors[0]) || e;
    answer = {
      ok: false,
      error: {
        name: e.name,
        type: e.type || cause.type || null,
        message: String(e.message),
        cause: cause === e ? null : { name: cause.name, type: cause.type || null },
      },
    };
  }
  process.stdout.write(JSON.stringify(answer) + '\n');
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
    process.exit(1);
  },
);
