// The Apache Kafka Java client (kafka-clients 4.3.0) driven from Odradek's compat tests.
//
// Usage: java CompatClient COMMAND BOOTSTRAP [name=value ...]
// Commands: produce, txn-produce (transactions), consume, offsets-for-times, and admin
// commands (create-topic, list-offsets, remove-members, ...).
// Options named like "producer.X=Y", "consumer.X=Y" or "admin.X=Y" pass straight into
// that client's config; the rest are this program's own (topic=, partition=, ...).
//
// Records travel as one line each, fields separated by tabs, so any bytes survive:
//   stdin  (produce):  KEY VALUE HEADERS [TIMESTAMP]
//   stdout (consume):  REC PARTITION OFFSET TIMESTAMP TIMESTAMP_TYPE KEY VALUE HEADERS
// KEY and VALUE are base64, or "-" for null; HEADERS is "." for none, else
// comma-separated NAME_B64:VALUE_B64 pairs ("-" for a null header value).
// Every other answer is a tab-separated line starting with an upper-case word; a
// failure prints "ERROR<TAB>ExceptionClass<TAB>message" and exits with status 3.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.clients.admin.AlterClientQuotasOptions;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class CompatClient {
    private static final Base64.Encoder B64 = Base64.getEncoder();
    private static final Base64.Decoder UNB64 = Base64.getDecoder();

    private CompatClient() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: CompatClient COMMAND BOOTSTRAP [name=value ...]");
            System.exit(2);
        }
        String command = args[0];
        Map<String, String> opts = new HashMap<>();
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq < 0) {
                System.err.println("not name=value: " + args[i]);
                System.exit(2);
            }
            opts.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        int status;
        try {
            status = run(command, args[1], opts);
        } catch (Throwable e) {
            fail(e);
            status = 3;
        }
        System.out.flush();
        System.exit(status);
    }

    private static int run(String command, String bootstrap, Map<String, String> opts)
            throws Exception {
        switch (command) {
            case "produce":
                return produce(bootstrap, opts);
            case "txn-produce":
                return txnProduce(bootstrap, opts);
            case "consume":
                return consume(bootstrap, opts);
            case "group-consume":
                return groupConsume(bootstrap, opts);
            case "offsets-for-times":
                return offsetsForTimes(bootstrap, opts);
            default:
                try (Admin admin = Admin.create(clientProps(bootstrap, opts, "admin."))) {
                    return admin(command, admin, opts);
                }
        }
    }

    // -- producing ---------------------------------------------------------------------

    private static int produce(String bootstrap, Map<String, String> opts) throws Exception {
        Properties props = clientProps(bootstrap, opts, "producer.");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        String topic = opts.get("topic");
        Integer partition = opts.containsKey("partition")
                ? Integer.valueOf(opts.get("partition")) : null;
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.US_ASCII));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) {
                    continue;
                }
                String[] f = line.split("\t", -1);
                Long ts = f.length > 3 && !f[3].equals("-") ? Long.valueOf(f[3]) : null;
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(
                        topic, partition, ts, bytes(f[0]), bytes(f[1]), headers(f[2]));
                acks.add(producer.send(rec));
                if (acks.size() == 1 && opts.containsKey("ready-after-first")) {
                    producer.flush(); // connected and acknowledged: the caller may go on
                    System.out.println("READY");
                    System.out.flush();
                }
            }
            producer.flush();
            for (Map.Entry<MetricName, ? extends Metric> m : producer.metrics().entrySet()) {
                if (m.getKey().group().equals("producer-metrics")
                        && m.getKey().name().equals("record-retry-total")) {
                    System.out.println("METRIC\trecord-retry-total\t" + m.getValue().metricValue());
                }
            }
            int failed = 0;
            for (Future<RecordMetadata> f : acks) {
                try {
                    RecordMetadata md = f.get(60, TimeUnit.SECONDS);
                    System.out.println("ACK\t" + md.partition() + "\t" + md.offset() + "\t"
                            + md.timestamp());
                } catch (ExecutionException e) {
                    fail(e.getCause());
                    failed++;
                }
            }
            return failed == 0 ? 0 : 3;
        }
    }

    // Transactions: stdin holds record lines as for "produce"; a line "COMMIT" or "ABORT"
    // ends the transaction the records since the last such line belong to. Needs
    // producer.transactional.id. Prints "TXN<TAB>COMMIT|ABORT<TAB>records" per transaction.
    private static int txnProduce(String bootstrap, Map<String, String> opts) throws Exception {
        Properties props = clientProps(bootstrap, opts, "producer.");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        String topic = opts.get("topic");
        Integer partition = opts.containsKey("partition")
                ? Integer.valueOf(opts.get("partition")) : null;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.US_ASCII));
            String line;
            boolean open = false;
            int count = 0;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) {
                    continue;
                }
                if (line.equals("COMMIT") || line.equals("ABORT")) {
                    if (!open) {
                        producer.beginTransaction();
                    }
                    if (line.equals("COMMIT")) {
                        producer.commitTransaction();
                    } else {
                        producer.flush(); // into the log first: the abort has data to hide
                        producer.abortTransaction();
                    }
                    System.out.println("TXN\t" + line + "\t" + count);
                    open = false;
                    count = 0;
                    continue;
                }
                if (!open) {
                    producer.beginTransaction();
                    open = true;
                }
                String[] f = line.split("\t", -1);
                Long ts = f.length > 3 && !f[3].equals("-") ? Long.valueOf(f[3]) : null;
                producer.send(new ProducerRecord<>(
                        topic, partition, ts, bytes(f[0]), bytes(f[1]), headers(f[2])));
                count++;
            }
            if (open) {
                producer.abortTransaction();
            }
            return 0;
        }
    }

    // -- consuming ---------------------------------------------------------------------

    private static KafkaConsumer<byte[], byte[]> consumer(String bootstrap,
            Map<String, String> opts) {
        Properties props = clientProps(bootstrap, opts, "consumer.");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.putIfAbsent("enable.auto.commit", "false");
        return new KafkaConsumer<>(props);
    }

    private static List<TopicPartition> partitions(KafkaConsumer<byte[], byte[]> consumer,
            Map<String, String> opts) {
        String topic = opts.get("topic");
        List<TopicPartition> tps = new ArrayList<>();
        if (opts.containsKey("partitions")) {
            for (String p : opts.get("partitions").split(",")) {
                tps.add(new TopicPartition(topic, Integer.parseInt(p)));
            }
        } else {
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                tps.add(new TopicPartition(topic, info.partition()));
            }
        }
        return tps;
    }

    // subscribe(topic) in a group (consumer.group.id, consumer.group.protocol, ...) and
    // poll until duration.ms passes, count records were seen, the assignment stayed the
    // same (and non-empty) for stable.ms, or it grew back to regain.size partitions after
    // having been smaller; prints "ASSIGNMENT<TAB>MILLIS<TAB>p,p,..." whenever the
    // assignment changes and "COUNT<TAB>n" at the end, after a synchronous commit.
    private static int groupConsume(String bootstrap, Map<String, String> opts)
            throws Exception {
        long expected = Long.parseLong(opts.getOrDefault("count", "-1"));
        long durationMs = Long.parseLong(opts.getOrDefault("duration.ms", "20000"));
        long stableMs = Long.parseLong(opts.getOrDefault("stable.ms", "-1"));
        int regain = Integer.parseInt(opts.getOrDefault("regain.size", "-1"));
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, opts)) {
            consumer.subscribe(Collections.singletonList(opts.get("topic")));
            long seen = 0;
            String last = null;
            long changedAt = System.currentTimeMillis();
            boolean shrunk = false;
            long deadline = changedAt + durationMs;
            while (System.currentTimeMillis() < deadline && (expected < 0 || seen < expected)) {
                seen += consumer.poll(Duration.ofMillis(100)).count();
                List<Integer> owned = new ArrayList<>();
                for (TopicPartition tp : consumer.assignment()) {
                    owned.add(tp.partition());
                }
                Collections.sort(owned);
                StringBuilder sb = new StringBuilder();
                for (Integer p : owned) {
                    sb.append(sb.length() == 0 ? "" : ",").append(p);
                }
                String now = sb.toString();
                long millis = System.currentTimeMillis();
                if (!now.equals(last)) {
                    System.out.println("ASSIGNMENT\t" + millis + "\t" + now);
                    System.out.flush();
                    last = now;
                    changedAt = millis;
                }
                if (regain > 0 && !owned.isEmpty() && owned.size() < regain) {
                    shrunk = true;
                }
                if (regain > 0 && shrunk && owned.size() == regain) {
                    break;
                }
                if (stableMs >= 0 && !owned.isEmpty() && millis - changedAt >= stableMs) {
                    break;
                }
            }
            consumer.commitSync(Duration.ofSeconds(30));
            System.out.println("COUNT\t" + seen);
        }
        return 0;
    }

    private static int consume(String bootstrap, Map<String, String> opts) throws Exception {
        long expected = Long.parseLong(opts.getOrDefault("count", "-1"));
        long timeoutMs = Long.parseLong(opts.getOrDefault("timeout.ms", "20000"));
        String from = opts.getOrDefault("from", "earliest");
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, opts)) {
            List<TopicPartition> tps = partitions(consumer, opts);
            consumer.assign(tps);
            if (from.equals("earliest")) {
                consumer.seekToBeginning(tps);
            } else if (from.equals("latest")) {
                consumer.seekToEnd(tps);
            } else if (!from.equals("reset")) {
                for (TopicPartition tp : tps) {
                    consumer.seek(tp, Long.parseLong(from));
                }
            }
            long seen = 0;
            long deadline = System.currentTimeMillis() + timeoutMs;
            while ((expected < 0 || seen < expected) && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    if (expected >= 0 && seen >= expected) {
                        break;
                    }
                    System.out.println("REC\t" + r.partition() + "\t" + r.offset() + "\t"
                            + r.timestamp() + "\t" + r.timestampType().name + "\t"
                            + b64(r.key()) + "\t" + b64(r.value()) + "\t"
                            + headersText(r.headers()));
                    seen++;
                }
                if (expected < 0 && batch.isEmpty() && endReached(consumer, tps)) {
                    break;
                }
            }
            System.out.println("END\t" + seen);
            return 0;
        }
    }

    private static boolean endReached(KafkaConsumer<byte[], byte[]> consumer,
            List<TopicPartition> tps) {
        Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Duration.ofSeconds(10));
        for (TopicPartition tp : tps) {
            if (consumer.position(tp) < ends.get(tp)) {
                return false;
            }
        }
        return true;
    }

    private static int offsetsForTimes(String bootstrap, Map<String, String> opts) {
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, opts)) {
            TopicPartition tp = new TopicPartition(opts.get("topic"),
                    Integer.parseInt(opts.getOrDefault("partition", "0")));
            long ts = Long.parseLong(opts.get("timestamp"));
            Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(
                    Collections.singletonMap(tp, ts), Duration.ofSeconds(30));
            OffsetAndTimestamp at = found.get(tp);
            if (at == null) {
                System.out.println("NONE");
            } else {
                System.out.println("OFFSET\t" + at.offset() + "\t" + at.timestamp() + "\t"
                        + at.leaderEpoch().orElse(-1));
            }
            Map<TopicPartition, Long> begin = consumer.beginningOffsets(
                    Collections.singletonList(tp), Duration.ofSeconds(30));
            Map<TopicPartition, Long> end = consumer.endOffsets(
                    Collections.singletonList(tp), Duration.ofSeconds(30));
            System.out.println("RANGE\t" + begin.get(tp) + "\t" + end.get(tp));
            return 0;
        }
    }

    // -- admin -------------------------------------------------------------------------

    private static int admin(String command, Admin admin, Map<String, String> opts)
            throws Exception {
        String topic = opts.get("topic");
        switch (command) {
            case "create-topic": {
                Map<String, String> configs = new HashMap<>();
                for (Map.Entry<String, String> e : opts.entrySet()) {
                    if (e.getKey().startsWith("config.")) {
                        configs.put(e.getKey().substring(7), e.getValue());
                    }
                }
                NewTopic nt = new NewTopic(topic,
                        Integer.parseInt(opts.getOrDefault("partitions", "1")),
                        Short.parseShort(opts.getOrDefault("rf", "1"))).configs(configs);
                admin.createTopics(Collections.singleton(nt)).all().get(30, TimeUnit.SECONDS);
                System.out.println("OK");
                return 0;
            }
            case "list-topics": {
                for (String name : admin.listTopics().names().get(30, TimeUnit.SECONDS)) {
                    System.out.println("TOPIC\t" + name);
                }
                return 0;
            }
            case "describe-topic": {
                TopicDescription d = admin.describeTopics(Collections.singleton(topic))
                        .allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
                System.out.println("TOPIC\t" + d.name() + "\t" + d.topicId() + "\t"
                        + d.partitions().size() + "\t" + d.isInternal());
                for (TopicPartitionInfo p : d.partitions()) {
                    System.out.println("PARTITION\t" + p.partition() + "\t"
                            + (p.leader() == null ? -1 : p.leader().id()) + "\t"
                            + nodeIds(p.replicas()) + "\t" + nodeIds(p.isr()));
                }
                return 0;
            }
            case "delete-topic": {
                admin.deleteTopics(Collections.singleton(topic)).all().get(30, TimeUnit.SECONDS);
                System.out.println("OK");
                return 0;
            }
            case "create-partitions": {
                admin.createPartitions(Collections.singletonMap(topic,
                        NewPartitions.increaseTo(Integer.parseInt(opts.get("total")))))
                        .all().get(30, TimeUnit.SECONDS);
                System.out.println("OK");
                return 0;
            }
            case "describe-configs": {
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                Config config = admin.describeConfigs(Collections.singleton(res),
                        new DescribeConfigsOptions().includeSynonyms(true)
                                .includeDocumentation(true))
                        .all().get(30, TimeUnit.SECONDS).get(res);
                for (ConfigEntry e : config.entries()) {
                    System.out.println("CONFIG\t" + e.name() + "\t" + e.source() + "\t"
                            + e.isDefault() + "\t" + e.isReadOnly() + "\t" + e.isSensitive()
                            + "\t" + e.type() + "\t" + e.synonyms().size() + "\t"
                            + (e.value() == null ? "-" : b64(e.value().getBytes(
                                    StandardCharsets.UTF_8))));
                }
                return 0;
            }
            case "alter-config": {
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                AlterConfigOp op = opts.containsKey("value")
                        ? new AlterConfigOp(new ConfigEntry(opts.get("name"), opts.get("value")),
                                AlterConfigOp.OpType.SET)
                        : new AlterConfigOp(new ConfigEntry(opts.get("name"), null),
                                AlterConfigOp.OpType.DELETE);
                Map<ConfigResource, Collection<AlterConfigOp>> ops = new HashMap<>();
                ops.put(res, Collections.singletonList(op));
                admin.incrementalAlterConfigs(ops).all().get(30, TimeUnit.SECONDS);
                System.out.println("OK");
                return 0;
            }
            case "list-offsets": {
                TopicPartition tp = new TopicPartition(topic,
                        Integer.parseInt(opts.getOrDefault("partition", "0")));
                String spec = opts.get("spec");
                OffsetSpec os;
                if (spec.equals("earliest")) {
                    os = OffsetSpec.earliest();
                } else if (spec.equals("latest")) {
                    os = OffsetSpec.latest();
                } else if (spec.equals("max-timestamp")) {
                    os = OffsetSpec.maxTimestamp();
                } else {
                    os = OffsetSpec.forTimestamp(Long.parseLong(spec));
                }
                ListOffsetsResult.ListOffsetsResultInfo info = admin
                        .listOffsets(Collections.singletonMap(tp, os))
                        .partitionResult(tp).get(30, TimeUnit.SECONDS);
                System.out.println("OFFSET\t" + info.offset() + "\t" + info.timestamp() + "\t"
                        + info.leaderEpoch().orElse(-1));
                return 0;
            }
            case "delete-records": {
                TopicPartition tp = new TopicPartition(topic,
                        Integer.parseInt(opts.getOrDefault("partition", "0")));
                long low = admin.deleteRecords(Collections.singletonMap(tp,
                        RecordsToDelete.beforeOffset(Long.parseLong(opts.get("before")))))
                        .lowWatermarks().get(tp).get(30, TimeUnit.SECONDS).lowWatermark();
                System.out.println("LOW\t" + low);
                return 0;
            }
            case "alter-client-quota": {
                // user=NAME|<default>, client=NAME|<default>, key=K, value=V (none: remove)
                Map<String, String> parts = new HashMap<>();
                if (opts.containsKey("user")) {
                    parts.put(ClientQuotaEntity.USER, quotaName(opts.get("user")));
                }
                if (opts.containsKey("client")) {
                    parts.put(ClientQuotaEntity.CLIENT_ID, quotaName(opts.get("client")));
                }
                ClientQuotaAlteration.Op op = new ClientQuotaAlteration.Op(opts.get("key"),
                        opts.containsKey("value") ? Double.valueOf(opts.get("value")) : null);
                admin.alterClientQuotas(
                        Collections.singleton(new ClientQuotaAlteration(
                                new ClientQuotaEntity(parts), Collections.singleton(op))),
                        new AlterClientQuotasOptions().validateOnly(
                                Boolean.parseBoolean(opts.getOrDefault("validate", "false"))))
                        .all().get(30, TimeUnit.SECONDS);
                System.out.println("OK");
                return 0;
            }
            case "describe-client-quotas": {
                // QUOTA USER CLIENT KEY VALUE per value ("-": no such part).
                List<ClientQuotaFilterComponent> components = new ArrayList<>();
                for (String[] t : new String[][] {{"user", ClientQuotaEntity.USER},
                        {"client", ClientQuotaEntity.CLIENT_ID}}) {
                    String v = opts.get(t[0]);
                    if (v != null) {
                        components.add(v.equals("<default>")
                                ? ClientQuotaFilterComponent.ofDefaultEntity(t[1])
                                : ClientQuotaFilterComponent.ofEntity(t[1], v));
                    }
                }
                ClientQuotaFilter filter = opts.containsKey("strict")
                        ? ClientQuotaFilter.containsOnly(components)
                        : ClientQuotaFilter.contains(components);
                Map<ClientQuotaEntity, Map<String, Double>> found =
                        admin.describeClientQuotas(filter).entities().get(30, TimeUnit.SECONDS);
                for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : found.entrySet()) {
                    Map<String, String> parts = e.getKey().entries();
                    for (Map.Entry<String, Double> v : e.getValue().entrySet()) {
                        System.out.println("QUOTA\t" + quotaPart(parts, ClientQuotaEntity.USER)
                                + "\t" + quotaPart(parts, ClientQuotaEntity.CLIENT_ID) + "\t"
                                + v.getKey() + "\t" + v.getValue());
                    }
                }
                return 0;
            }
            case "describe-cluster": {
                DescribeClusterResult d = admin.describeCluster();
                Node controller = d.controller().get(30, TimeUnit.SECONDS);
                System.out.println("CLUSTER\t" + d.clusterId().get(30, TimeUnit.SECONDS) + "\t"
                        + (controller == null ? -1 : controller.id()) + "\t"
                        + nodeIds(new ArrayList<>(d.nodes().get(30, TimeUnit.SECONDS))));
                return 0;
            }
            case "broker-identity": {
                // The broker ids Metadata lists, used everywhere a broker id goes: a manual
                // replica assignment, DescribeConfigs(BROKER) and DescribeLogDirs per id.
                DescribeClusterResult d = admin.describeCluster();
                Node controller = d.controller().get(30, TimeUnit.SECONDS);
                List<Integer> ids = new ArrayList<>();
                for (Node n : d.nodes().get(30, TimeUnit.SECONDS)) {
                    ids.add(n.id());
                }
                Collections.sort(ids);
                System.out.println("CLUSTER\t" + (controller == null ? -1 : controller.id())
                        + "\t" + ids);
                Map<Integer, List<Integer>> assignment = new HashMap<>();
                int rf = Math.min(2, ids.size());
                for (int p = 0; p < ids.size(); p++) {
                    List<Integer> replicas = new ArrayList<>();
                    for (int k = 0; k < rf; k++) {
                        replicas.add(ids.get((p + k) % ids.size()));
                    }
                    assignment.put(p, replicas);
                }
                admin.createTopics(Collections.singleton(new NewTopic(topic, assignment)))
                        .all().get(30, TimeUnit.SECONDS);
                TopicDescription td = admin.describeTopics(Collections.singleton(topic))
                        .allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
                for (TopicPartitionInfo p : td.partitions()) {
                    System.out.println("PARTITION\t" + p.partition() + "\t"
                            + (p.leader() == null ? -1 : p.leader().id()) + "\t"
                            + nodeIds(p.replicas()) + "\t" + nodeIds(p.isr()));
                }
                for (int id : ids) {
                    ConfigResource res = new ConfigResource(ConfigResource.Type.BROKER,
                            String.valueOf(id));
                    Config config = admin.describeConfigs(Collections.singleton(res))
                            .all().get(30, TimeUnit.SECONDS).get(res);
                    ConfigEntry max = config.get("message.max.bytes");
                    System.out.println("BROKER_CONFIGS\t" + id + "\t" + config.entries().size()
                            + "\t" + (max == null ? "-" : max.value()));
                }
                Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(ids)
                        .allDescriptions().get(30, TimeUnit.SECONDS);
                for (int id : ids) {
                    int hosted = 0;
                    for (LogDirDescription dir : dirs.get(id).values()) {
                        for (TopicPartition tp : dir.replicaInfos().keySet()) {
                            if (tp.topic().equals(topic)) {
                                hosted++;
                            }
                        }
                    }
                    System.out.println("LOG_DIRS\t" + id + "\t" + dirs.get(id).size() + "\t"
                            + hosted);
                }
                return 0;
            }
            // Transactions (KIP-664): TXN <id> <producer id> <state> per listed transaction;
            // DESC <id> <state> <producer id> <epoch> <timeout> <partitions>; PRODUCER
            // <partition> <producer id> <epoch> <last sequence> <txn start offset or -1>
            // <coordinator epoch of its last marker or -1>.
            case "list-transactions": {
                for (TransactionListing t : admin.listTransactions().all().get(30, TimeUnit.SECONDS)) {
                    System.out.println("TXN\t" + t.transactionalId() + "\t" + t.producerId() + "\t"
                            + t.state());
                }
                return 0;
            }
            case "describe-transactions": {
                List<String> ids = List.of(opts.get("ids").split(","));
                Map<String, TransactionDescription> found =
                        admin.describeTransactions(ids).all().get(30, TimeUnit.SECONDS);
                for (String id : ids) {
                    TransactionDescription d = found.get(id);
                    List<String> parts = new ArrayList<>();
                    for (TopicPartition tp : d.topicPartitions()) {
                        parts.add(tp.toString());
                    }
                    Collections.sort(parts);
                    System.out.println("DESC\t" + id + "\t" + d.state() + "\t" + d.producerId()
                            + "\t" + d.producerEpoch() + "\t" + d.transactionTimeoutMs() + "\t"
                            + String.join(",", parts));
                }
                return 0;
            }
            case "describe-producers": {
                List<TopicPartition> tps = new ArrayList<>();
                for (String p : opts.get("partitions").split(",")) {
                    tps.add(new TopicPartition(topic, Integer.parseInt(p)));
                }
                for (Map.Entry<TopicPartition, PartitionProducerState> e
                        : admin.describeProducers(tps).all().get(30, TimeUnit.SECONDS).entrySet()) {
                    for (ProducerState p : e.getValue().activeProducers()) {
                        System.out.println("PRODUCER\t" + e.getKey().partition() + "\t"
                                + p.producerId() + "\t" + p.producerEpoch() + "\t"
                                + p.lastSequence() + "\t"
                                + (p.currentTransactionStartOffset().isPresent()
                                        ? p.currentTransactionStartOffset().getAsLong() : -1)
                                + "\t" + (p.coordinatorEpoch().isPresent()
                                        ? p.coordinatorEpoch().getAsInt() : -1));
                    }
                }
                return 0;
            }
            // kafka-transactions.sh abort: an ABORT marker for producer <pid> (epoch <epoch>,
            // coordinator epoch <coordinator-epoch>) on <topic>-<partition>; prints ABORTED.
            case "abort-transaction": {
                TopicPartition tp = new TopicPartition(topic, Integer.parseInt(opts.get("partition")));
                AbortTransactionSpec spec = new AbortTransactionSpec(tp,
                        Long.parseLong(opts.get("producer-id")),
                        Short.parseShort(opts.get("producer-epoch")),
                        Integer.parseInt(opts.get("coordinator-epoch")));
                admin.abortTransaction(spec).all().get(30, TimeUnit.SECONDS);
                System.out.println("ABORTED\t" + tp);
                return 0;
            }
            // removeMembersFromConsumerGroup (KIP-345, KAFKA-18188): the static members of
            // group=<group> named by instances=<id,...>, or every member when instances is
            // absent. Prints MEMBER <instance> <NONE or the exception's class> per instance
            // named, then REMOVED <OK or the exception's class> for the whole call.
            case "remove-members": {
                String group = opts.get("group");
                RemoveMembersFromConsumerGroupOptions options;
                List<MemberToRemove> named = new ArrayList<>();
                if (opts.containsKey("instances")) {
                    for (String id : opts.get("instances").split(",")) {
                        named.add(new MemberToRemove(id));
                    }
                    options = new RemoveMembersFromConsumerGroupOptions(named);
                } else {
                    options = new RemoveMembersFromConsumerGroupOptions();
                }
                RemoveMembersFromConsumerGroupResult result =
                        admin.removeMembersFromConsumerGroup(group, options);
                for (MemberToRemove m : named) {
                    String outcome = "NONE";
                    try {
                        result.memberResult(m).get(30, TimeUnit.SECONDS);
                    } catch (ExecutionException e) {
                        outcome = e.getCause().getClass().getSimpleName();
                    }
                    System.out.println("MEMBER\t" + m.groupInstanceId() + "\t" + outcome);
                }
                String all = "OK";
                try {
                    result.all().get(30, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    all = e.getCause().getClass().getSimpleName();
                }
                System.out.println("REMOVED\t" + all);
                return 0;
            }
            default:
                System.err.println("unknown command " + command);
                return 2;
        }
    }

    // -- helpers -----------------------------------------------------------------------

    private static String quotaName(String name) {
        return name.equals("<default>") ? null : name;
    }

    private static String quotaPart(Map<String, String> parts, String type) {
        if (!parts.containsKey(type)) {
            return "-";
        }
        String name = parts.get(type);
        return name == null ? "<default>" : name;
    }

    private static Properties clientProps(String bootstrap, Map<String, String> opts,
            String prefix) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("client.id", "odradek-compat-java");
        for (Map.Entry<String, String> e : opts.entrySet()) {
            if (e.getKey().startsWith(prefix)) {
                props.put(e.getKey().substring(prefix.length()), e.getValue());
            }
        }
        return props;
    }

    private static void fail(Throwable e) {
        Throwable t = e;
        while (t instanceof ExecutionException && t.getCause() != null) {
            t = t.getCause();
        }
        StringBuilder msg = new StringBuilder(String.valueOf(t.getMessage()));
        for (Throwable c = t.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
            msg.append(" <- ").append(c.getClass().getSimpleName()).append(": ")
                    .append(c.getMessage());
        }
        System.out.println("ERROR\t" + t.getClass().getSimpleName() + "\t"
                + msg.toString().replace('\t', ' ').replace('\n', ' '));
    }

    private static byte[] bytes(String field) {
        return field.equals("-") ? null : UNB64.decode(field);
    }

    private static String b64(byte[] data) {
        return data == null ? "-" : B64.encodeToString(data);
    }

    private static List<Header> headers(String field) {
        List<Header> out = new ArrayList<>();
        if (field.equals(".")) {
            return out;
        }
        for (String pair : field.split(",")) {
            int colon = pair.indexOf(':');
            String name = new String(UNB64.decode(pair.substring(0, colon)),
                    StandardCharsets.UTF_8);
            out.add(new RecordHeader(name, bytes(pair.substring(colon + 1))));
        }
        return out;
    }

    private static String headersText(Iterable<Header> headers) {
        StringBuilder sb = new StringBuilder();
        for (Header h : headers) {
            if (sb.length() > 0) {
                sb.append(',');
            }
            sb.append(b64(h.key().getBytes(StandardCharsets.UTF_8))).append(':')
                    .append(b64(h.value()));
        }
        return sb.length() == 0 ? "." : sb.toString();
    }

    private static String nodeIds(List<Node> nodes) {
        StringBuilder sb = new StringBuilder();
        for (Node n : nodes) {
            if (sb.length() > 0) {
                sb.append(',');
            }
            sb.append(n.id());
        }
        return sb.toString();
    }
}
