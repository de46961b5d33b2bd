// The Java AdminClient (kafka-clients 4.3.0) driving reassignments, elections and log
// directories for Odradek's compat tests.
//
// Usage: java ReassignClient COMMAND BOOTSTRAP [name=value ...]
// Every answer is a tab-separated line starting with an upper-case word; a failure prints
// "ERROR<TAB>KAFKA_ERROR_NAME<TAB>message" (the name from Errors.forException) and exits 3.
// Per-partition outcomes of elections are lines of their own ("ELECTED t p NONE|NAME").
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.protocol.Errors;

public final class ReassignClient {
    private ReassignClient() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            opts.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        Properties props = new Properties();
        props.put("bootstrap.servers", args[1]);
        props.put("request.timeout.ms", "30000");
        props.put("default.api.timeout.ms", "60000");
        int status = 0;
        try (Admin admin = Admin.create(props)) {
            run(args[0], admin, opts);
        } catch (Throwable e) {
            Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            System.out.println("ERROR\t" + Errors.forException(cause).name() + "\t"
                + String.valueOf(cause.getMessage()).replace('\n', ' '));
            status = 3;
        }
        System.out.flush();
        System.exit(status);
    }

    private static List<Integer> ints(String csv) {
        List<Integer> out = new ArrayList<>();
        if (csv == null || csv.isEmpty()) {
            return out;
        }
        for (String s : csv.split(",")) {
            out.add(Integer.valueOf(s.trim()));
        }
        return out;
    }

    private static String csv(List<Integer> values) {
        StringBuilder b = new StringBuilder();
        for (Integer v : values) {
            if (b.length() > 0) {
                b.append(',');
            }
            b.append(v);
        }
        return b.toString();
    }

    private static void run(String command, Admin admin, Map<String, String> opts) throws Exception {
        switch (command) {
            case "reassign": {
                TopicPartition tp = new TopicPartition(opts.get("topic"), Integer.parseInt(opts.get("partition")));
                String replicas = opts.get("replicas");
                Optional<NewPartitionReassignment> target = "cancel".equals(replicas)
                    ? Optional.empty()
                    : Optional.of(new NewPartitionReassignment(ints(replicas)));
                Map<TopicPartition, Optional<NewPartitionReassignment>> request = new HashMap<>();
                request.put(tp, target);
                admin.alterPartitionReassignments(request).all().get(60, TimeUnit.SECONDS);
                System.out.println("OK");
                return;
            }
            case "list-reassignments": {
                Map<TopicPartition, PartitionReassignment> ongoing =
                    admin.listPartitionReassignments().reassignments().get(60, TimeUnit.SECONDS);
                for (Map.Entry<TopicPartition, PartitionReassignment> e : ongoing.entrySet()) {
                    PartitionReassignment r = e.getValue();
                    System.out.println("REASSIGNMENT\t" + e.getKey().topic() + "\t" + e.getKey().partition()
                        + "\t" + csv(r.replicas()) + "\t" + csv(r.addingReplicas()) + "\t" + csv(r.removingReplicas()));
                }
                System.out.println("END");
                return;
            }
            case "elect": {
                ElectionType type = ElectionType.valueOf(opts.getOrDefault("type", "PREFERRED"));
                Set<TopicPartition> partitions = new HashSet<>();
                for (Integer p : ints(opts.get("partitions"))) {
                    partitions.add(new TopicPartition(opts.get("topic"), p));
                }
                Map<TopicPartition, Optional<Throwable>> results =
                    admin.electLeaders(type, partitions).partitions().get(60, TimeUnit.SECONDS);
                for (Map.Entry<TopicPartition, Optional<Throwable>> e : results.entrySet()) {
                    String outcome = e.getValue().map(t -> Errors.forException(t).name()).orElse("NONE");
                    System.out.println("ELECTED\t" + e.getKey().topic() + "\t" + e.getKey().partition() + "\t" + outcome);
                }
                return;
            }
            case "describe-log-dirs": {
                List<Integer> brokers = ints(opts.get("brokers"));
                Map<Integer, Map<String, LogDirDescription>> all =
                    admin.describeLogDirs(brokers).allDescriptions().get(60, TimeUnit.SECONDS);
                for (Map.Entry<Integer, Map<String, LogDirDescription>> b : all.entrySet()) {
                    for (Map.Entry<String, LogDirDescription> d : b.getValue().entrySet()) {
                        LogDirDescription desc = d.getValue();
                        String error = desc.error() == null ? "NONE" : Errors.forException(desc.error()).name();
                        System.out.println("LOGDIR\t" + b.getKey() + "\t" + d.getKey() + "\t" + error + "\t"
                            + desc.totalBytes().orElse(-1L) + "\t" + desc.usableBytes().orElse(-1L));
                        for (Map.Entry<TopicPartition, ReplicaInfo> r : desc.replicaInfos().entrySet()) {
                            ReplicaInfo info = r.getValue();
                            System.out.println("REPLICA\t" + b.getKey() + "\t" + d.getKey() + "\t" + r.getKey().topic()
                                + "\t" + r.getKey().partition() + "\t" + info.size() + "\t" + info.offsetLag()
                                + "\t" + info.isFuture());
                        }
                    }
                }
                return;
            }
            case "alter-log-dir": {
                TopicPartitionReplica replica = new TopicPartitionReplica(opts.get("topic"),
                    Integer.parseInt(opts.get("partition")), Integer.parseInt(opts.get("broker")));
                Map<TopicPartitionReplica, String> request = new HashMap<>();
                request.put(replica, opts.get("path"));
                admin.alterReplicaLogDirs(request).all().get(60, TimeUnit.SECONDS);
                System.out.println("OK");
                return;
            }
            case "replica-log-dir": {
                TopicPartitionReplica replica = new TopicPartitionReplica(opts.get("topic"),
                    Integer.parseInt(opts.get("partition")), Integer.parseInt(opts.get("broker")));
                Map<TopicPartitionReplica, ReplicaLogDirInfo> infos =
                    admin.describeReplicaLogDirs(Arrays.asList(replica)).all().get(60, TimeUnit.SECONDS);
                ReplicaLogDirInfo info = infos.get(replica);
                System.out.println("REPLICADIR\t" + info.getCurrentReplicaLogDir() + "\t"
                    + info.getFutureReplicaLogDir() + "\t" + info.getFutureReplicaOffsetLag());
                return;
            }
            default:
                throw new IllegalArgumentException("unknown command " + command);
        }
    }
}
