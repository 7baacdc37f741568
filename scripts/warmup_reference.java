// Dubbo's AbstractLoadBalance.calculateWarmupWeight, run by the JVM: the reference table
// balance/tests/warmup_reference.rs compares routechain's port with.
// Regenerate: java scripts/warmup_reference.java > balance/tests/data/warmup_reference.txt
import java.util.Random;

public class warmup_reference {
    static int calculateWarmupWeight(int uptime, int warmup, int weight) {
        int ww = (int) (uptime / ((float) warmup / weight));
        return ww < 1 ? 1 : (Math.min(ww, weight));
    }

    public static void main(String[] args) {
        Random r = new Random(32);
        int[] warmups = {600000, 1000, 60000, 123457, 2147483647, 7, 3600000};
        int[] weights = {100, 1, 3, 50, 200, 999, 65535, 2147483647};
        System.out.println("# uptime warmup weight calculateWarmupWeight");
        for (int warmup : warmups) {
            for (int weight : weights) {
                for (int k = 0; k < 40; k++) {
                    int uptime = 1 + (int) ((r.nextDouble()) * (warmup - 1));
                    if (uptime >= warmup) uptime = warmup - 1;
                    if (uptime < 1) uptime = 1;
                    System.out.println(uptime + " " + warmup + " " + weight + " "
                            + calculateWarmupWeight(uptime, warmup, weight));
                }
                // The edges: one millisecond in, and one before the end.
                if (warmup > 2) {
                    System.out.println(1 + " " + warmup + " " + weight + " " + calculateWarmupWeight(1, warmup, weight));
                    System.out.println((warmup - 1) + " " + warmup + " " + weight + " "
                            + calculateWarmupWeight(warmup - 1, warmup, weight));
                }
            }
        }
    }
}
