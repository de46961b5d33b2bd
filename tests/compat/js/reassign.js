// kafkajs's admin driving partition reassignments, for Odradek's compat tests.
//
// Usage: node reassign.js COMMAND BOOTSTRAP < request.json (protocol.js: one JSON object
// in, one JSON line out).
//   alter  {"topic", "partition", "replicas": [ids] | null}
//   list   {"topics": [{"topic", "partitions": [..]}] | null}
//   topic  {"topic"}: the partitions' replicas as the client's metadata shows them
'use strict';

const { serve } = require('./protocol');

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

serve('odradek-compat-reassign', () => 3, run);
