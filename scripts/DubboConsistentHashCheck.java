/*
 * Cross-check for scripts/dubbo_consistent_hash.py. Run by `python3 scripts/dubbo_consistent_hash.py
 * --verify-java`; by hand: java scripts/DubboConsistentHashCheck.java CASES.tsv REMOVED_ADDRESS
 * REPLICA_NUMBER ADDRESS...
 *
 * The marked parts are copied verbatim from Apache Dubbo (Apache License 2.0), branch 3.3 commit
 * 324c62550ab22ffa53bce15f219bbc1d67b8c4a3:
 *   dubbo-cluster/.../loadbalance/ConsistentHashLoadBalance.java: the ring-building loop of the
 *     ConsistentHashSelector constructor, select(), toKey(), selectForKey(), hash()
 *   dubbo-common/.../common/io/Bytes.java: getMD5(String), getMD5(byte[]), getMessageDigest()
 *   dubbo-common/.../common/constants/CommonConstants.java: COMMA_SPLIT_PATTERN
 * with Invoker<T> replaced by its address String (invoker.getUrl().getAddress()) and the
 * Invocation by its argument array (RpcUtils.getArguments(invocation)).
 *
 * CASES.tsv: one call a line: hash.arguments, then one field per argument: "s:TEXT" (String),
 * "i:N" (Integer) or "n:" (null), tab-separated.
 * Prints tab-separated lines: R point address (full ring, TreeMap order), RR (ring without
 * REMOVED_ADDRESS), S key point address (selection on the full ring), SR (on the smaller ring).
 */
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;

public class DubboConsistentHashCheck {

    // CommonConstants.java (verbatim)
    static final Pattern COMMA_SPLIT_PATTERN = Pattern.compile("\\s*[,]+\\s*");

    // Bytes.java (verbatim, MD is its ThreadLocal)
    private static final ThreadLocal<MessageDigest> MD = new ThreadLocal<MessageDigest>();

    public static byte[] getMD5(String str) {
        return getMD5(str.getBytes());
    }

    public static byte[] getMD5(byte[] source) {
        MessageDigest md = getMessageDigest();
        return md.digest(source);
    }

    private static MessageDigest getMessageDigest() {
        MessageDigest ret = MD.get();
        if (ret == null) {
            try {
                ret = MessageDigest.getInstance("MD5");
                MD.set(ret);
            } catch (NoSuchAlgorithmException e) {
                throw new RuntimeException(e);
            }
        }
        return ret;
    }

    static final class ConsistentHashSelector {

        final TreeMap<Long, String> virtualInvokers;

        private final int replicaNumber;

        private final int[] argumentIndex;

        ConsistentHashSelector(List<String> invokers, int replicaNumber, String hashArguments) {
            this.virtualInvokers = new TreeMap<>();
            this.replicaNumber = replicaNumber;
            String[] index = COMMA_SPLIT_PATTERN.split(hashArguments);
            argumentIndex = new int[index.length];
            for (int i = 0; i < index.length; i++) {
                argumentIndex[i] = Integer.parseInt(index[i]);
            }
            // ---- verbatim from the constructor (invoker -> its address) ----
            for (String invoker : invokers) {
                String address = invoker;
                for (int i = 0; i < replicaNumber / 4; i++) {
                    byte[] digest = getMD5(address + i);
                    for (int h = 0; h < 4; h++) {
                        long m = hash(digest, h);
                        virtualInvokers.put(m, invoker);
                    }
                }
            }
        }

        // select(): returns the key and point as well, for the comparison
        public String[] select(Object[] arguments) {
            String key = toKey(arguments);

            byte[] digest = getMD5(key);
            long point = hash(digest, 0);
            return new String[] {key, Long.toString(point), selectForKey(point)};
        }

        // ---- verbatim ----
        private String toKey(Object[] args) {
            StringBuilder buf = new StringBuilder();
            for (int i : argumentIndex) {
                if (i >= 0 && args != null && i < args.length) {
                    buf.append(args[i]);
                }
            }
            return buf.toString();
        }

        private String selectForKey(long hash) {
            Map.Entry<Long, String> entry = virtualInvokers.ceilingEntry(hash);
            if (entry == null) {
                entry = virtualInvokers.firstEntry();
            }
            return entry.getValue();
        }

        private long hash(byte[] digest, int number) {
            return (((long) (digest[3 + number * 4] & 0xFF) << 24)
                            | ((long) (digest[2 + number * 4] & 0xFF) << 16)
                            | ((long) (digest[1 + number * 4] & 0xFF) << 8)
                            | (digest[number * 4] & 0xFF))
                    & 0xFFFFFFFFL;
        }
        // ---- end verbatim ----
    }

    static Object decode(String field) {
        switch (field.substring(0, 2)) {
            case "s:":
                return field.substring(2);
            case "i:":
                return Integer.valueOf(field.substring(2));
            case "n:":
                return null;
            default:
                throw new IllegalArgumentException(field);
        }
    }

    public static void main(String[] a) throws Exception {
        List<String> cases = Files.readAllLines(Path.of(a[0]));
        String removed = a[1];
        int replicaNumber = Integer.parseInt(a[2]);
        List<String> all = new ArrayList<>();
        for (int i = 3; i < a.length; i++) all.add(a[i]);
        List<String> rest = new ArrayList<>(all);
        rest.remove(removed);

        StringBuilder out = new StringBuilder();
        ConsistentHashSelector full = new ConsistentHashSelector(all, replicaNumber, "0");
        ConsistentHashSelector smaller = new ConsistentHashSelector(rest, replicaNumber, "0");
        for (Map.Entry<Long, String> e : full.virtualInvokers.entrySet())
            out.append("R\t").append(e.getKey()).append('\t').append(e.getValue()).append('\n');
        for (Map.Entry<Long, String> e : smaller.virtualInvokers.entrySet())
            out.append("RR\t").append(e.getKey()).append('\t').append(e.getValue()).append('\n');
        StringBuilder sr = new StringBuilder();
        for (String line : cases) {
            String[] f = line.split("\t", -1);
            Object[] args = new Object[f.length - 1];
            for (int i = 1; i < f.length; i++) args[i - 1] = decode(f[i]);
            String[] s = new ConsistentHashSelector(all, replicaNumber, f[0]).select(args);
            String[] t = new ConsistentHashSelector(rest, replicaNumber, f[0]).select(args);
            out.append("S\t").append(String.join("\t", s)).append('\n');
            sr.append("SR\t").append(String.join("\t", t)).append('\n');
        }
        System.out.print(out.append(sr));
    }
}
