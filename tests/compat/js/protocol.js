// The protocol every kafkajs script of the compat tests speaks (driver.js, reassign.js):
// `node SCRIPT COMMAND BOOTSTRAP < request.json`, one JSON object in, one JSON line out:
// {"ok": true, ...} or {"ok": false, "error": {"name", "type", "message", "cause"}}.
'use strict';

const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

// `req.security` ({mechanism, username, password, ca}): TLS trusting the CA file and
// SASL with that mechanism (plain, scram-sha-256, scram-sha-512), kafkajs' own options.
function securityOptions(security) {
  if (!security) {
    return {};
  }
  return {
    ssl: { ca: [fs.readFileSync(security.ca, 'utf8')] },
    sasl: {
      mechanism: security.mechanism.toLowerCase(),
      username: security.username,
      password: security.password,
    },
  };
}

// A kafkajs error as the Python side reads it (compat_clients.KafkajsClient.run).
function errorAnswer(e) {
  const cause = e.originalError || e.cause || (e.errors && e.errors[0]) || e;
  return {
    ok: false,
    error: {
      name: e.name,
      type: e.type || cause.type || null,
      message: String(e.message),
      cause: cause === e ? null : { name: cause.name, type: cause.type || null },
    },
  };
}

// Read the request, build the client (`retries(req)`: how often kafkajs retries), run
// `handle(kafka, command, req)` and print its answer (or the error's); exit 0 unless
// the script itself broke.
function serve(clientId, retries, handle) {
  async function main() {
    const [command, bootstrap] = process.argv.slice(2);
    const chunks = [];
    for await (const chunk of process.stdin) {
      chunks.push(chunk);
    }
    const text = Buffer.concat(chunks).toString('utf8').trim();
    const req = text ? JSON.parse(text) : {};
    const kafka = new Kafka({
      clientId,
      brokers: bootstrap.split(','),
      logLevel: logLevel.ERROR,
      retry: { retries: retries(req) },
      ...securityOptions(req.security),
    });
    let answer;
    try {
      answer = await handle(kafka, command, req);
    } catch (e) {
      answer = errorAnswer(e);
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
}

module.exports = { serve };
