// Dubbo's ShortestResponseLoadBalance and AdaptiveLoadBalance (with AdaptiveMetrics),
// ported line by line and run by the JVM over a seeded scenario: the reference
// balance/tests/response_reference.rs replays draw for draw.
// Regenerate: java scripts/response_balancers_reference.java > balance/tests/data/response_reference.txt
//
// What differs from Dubbo's classes, as in routechain (docs/load-balancing.md):
// - ThreadLocalRandom.nextInt(n) is `below(n)` on a splitmix64 stream seeded per scenario
//   (Lemire's unbiased method), so the Rust side draws the same numbers;
// - the clock is the scenario's (`now`, ms), elapsed times are microseconds;
// - the sliding window restarts synchronously after the pick (Dubbo: on an executor);
// - adaptive: the provider's CPU load is 1 and `curTime` is the consumer's clock when
//   the answer arrives (gRPC providers send no lb_adaptive attachment); both loads read
//   one timeout (Dubbo reads invoker2's timeout for both).
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

public class response_balancers_reference {
    static long seed;

    static long nextU64() {
        seed += 0x9E3779B97F4A7C15L;
        long z = seed;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    static long mulHighUnsigned(long a, long b) {
        return Math.multiplyHigh(a, b) + ((a >> 63) & b) + ((b >> 63) & a);
    }

    static int below(int n) {
        if (n <= 1) return 0;
        long threshold = Long.remainderUnsigned(-(long) n, n);
        while (true) {
            long x = nextU64();
            long lo = x * n;
            if (Long.compareUnsigned(lo, threshold) >= 0) return (int) mulHighUnsigned(x, n);
        }
    }

    // RpcStatus: active, succeeded, succeededElapsed (us).
    static int[] active;
    static long[] succeeded, succeededElapsed;
    // SlideWindowData offsets.
    static long[] succeededOffset, elapsedOffset;
    static long lastUpdateTime;
    static final int SLIDE_PERIOD = 30_000;
    static int[] weights;

    static long estimate(int i) {
        long succeed = succeeded[i] - succeededOffset[i];
        long avg = succeed == 0 ? 0 : (succeededElapsed[i] - elapsedOffset[i]) / succeed;
        return avg * (active[i] + 1);
    }

    static int shortestResponse(List<Integer> invokers, long now) {
        if (invokers.size() == 1) return invokers.get(0);
        int length = invokers.size();
        long shortestResponse = Long.MAX_VALUE;
        int shortestCount = 0;
        int[] shortestIndexes = new int[length];
        int[] w = new int[length];
        int totalWeight = 0, firstWeight = 0;
        boolean sameWeight = true;
        for (int i = 0; i < length; i++) {
            int inv = invokers.get(i);
            long estimateResponse = estimate(inv);
            int afterWarmup = weights[inv];
            w[i] = afterWarmup;
            if (estimateResponse < shortestResponse) {
                shortestResponse = estimateResponse;
                shortestCount = 1;
                shortestIndexes[0] = i;
                totalWeight = afterWarmup;
                firstWeight = afterWarmup;
                sameWeight = true;
            } else if (estimateResponse == shortestResponse) {
                shortestIndexes[shortestCount++] = i;
                totalWeight += afterWarmup;
                if (sameWeight && i > 0 && afterWarmup != firstWeight) sameWeight = false;
            }
        }
        int chosen = -1;
        if (shortestCount == 1) {
            chosen = invokers.get(shortestIndexes[0]);
        } else if (!sameWeight && totalWeight > 0) {
            int offsetWeight = below(totalWeight);
            for (int i = 0; i < shortestCount; i++) {
                int shortestIndex = shortestIndexes[i];
                offsetWeight -= w[shortestIndex];
                if (offsetWeight < 0) {
                    chosen = invokers.get(shortestIndex);
                    break;
                }
            }
        }
        if (chosen < 0) chosen = invokers.get(shortestIndexes[below(shortestCount)]);
        if (now - lastUpdateTime > SLIDE_PERIOD) {
            for (int i = 0; i < succeeded.length; i++) {
                succeededOffset[i] = succeeded[i];
                elapsedOffset[i] = succeededElapsed[i];
            }
            lastUpdateTime = now;
        }
        return chosen;
    }

    // AdaptiveMetrics, one per provider.
    static long[] currentProviderTime, lastLatency, currentTime, pickTime, consumerReq, consumerSuccess, errorReq;
    static double[] ewma;
    static final double beta = 0.5;
    static final int TIMEOUT = 1000;

    static double getLoad(int i, int weight, int timeout, long now) {
        if (now - pickTime[i] > timeout * 2) return 0;
        if (currentTime[i] > 0) {
            long multiple = (now - currentTime[i]) / timeout + 1;
            if (multiple > 0) {
                if (currentProviderTime[i] == currentTime[i]) {
                    lastLatency[i] = timeout * 2L;
                } else {
                    lastLatency[i] = lastLatency[i] >> multiple;
                }
                ewma[i] = beta * ewma[i] + (1 - beta) * lastLatency[i];
                currentTime[i] = now;
            }
        }
        long inflight = consumerReq[i] - consumerSuccess[i] - errorReq[i];
        double providerCPULoad = 1;
        return providerCPULoad * (Math.sqrt(ewma[i]) + 1) * (inflight + 1)
                / ((((double) consumerSuccess[i] / (double) (consumerReq[i] + 1)) * weight) + 1);
    }

    static void setProviderMetrics(int i, long serviceTime, long rt) {
        if (currentProviderTime[i] > serviceTime) return;
        currentProviderTime[i] = serviceTime;
        currentTime[i] = serviceTime;
        lastLatency[i] = rt;
        ewma[i] = beta * ewma[i] + (1 - beta) * lastLatency[i];
    }

    static int chooseLowLoadInvoker(int a, int b, long now) {
        int weight1 = weights[a], weight2 = weights[b];
        long load1 = Double.doubleToLongBits(getLoad(a, weight1, TIMEOUT, now));
        long load2 = Double.doubleToLongBits(getLoad(b, weight2, TIMEOUT, now));
        if (load1 == load2) {
            int totalWeight = weight1 + weight2;
            if (totalWeight > 0) {
                int offset = below(totalWeight);
                return offset < weight1 ? a : b;
            }
            return below(2) == 0 ? a : b;
        }
        return Double.longBitsToDouble(load1) > Double.longBitsToDouble(load2) ? b : a;
    }

    static int adaptive(List<Integer> invokers, long now) {
        if (invokers.size() == 1) return invokers.get(0);
        int chosen;
        int length = invokers.size();
        if (length == 2) {
            chosen = chooseLowLoadInvoker(invokers.get(0), invokers.get(1), now);
        } else {
            int pos1 = below(length);
            int pos2 = below(length - 1);
            if (pos2 >= pos1) pos2 = pos2 + 1;
            chosen = chooseLowLoadInvoker(invokers.get(pos1), invokers.get(pos2), now);
        }
        consumerReq[chosen]++;
        pickTime[chosen] = now;
        return chosen;
    }

    public static void main(String[] args) {
        weights = new int[] {100, 100, 200, 50, 100, 100};
        // Per-provider latency (us) and failure percentage.
        long[] base = {400, 5_000, 60_000, 300_000, 2_500_000, 900};
        int[] failPct = {2, 5, 1, 30, 10, 0};
        int n = weights.length;
        long start = 1_700_000_000_000L;
        for (String kind : new String[] {"shortestresponse", "adaptive"}) {
            seed = 0x5EED0000L + kind.length();
            Random driver = new Random(32 + kind.length());
            active = new int[n];
            succeeded = new long[n];
            succeededElapsed = new long[n];
            succeededOffset = new long[n];
            elapsedOffset = new long[n];
            currentProviderTime = new long[n];
            lastLatency = new long[n];
            currentTime = new long[n];
            pickTime = new long[n];
            consumerReq = new long[n];
            consumerSuccess = new long[n];
            errorReq = new long[n];
            ewma = new double[n];
            long now = start;
            lastUpdateTime = now;
            for (int i = 0; i < n; i++) pickTime[i] = now;
            System.out.println("kind " + kind + " " + Long.toUnsignedString(seed) + " " + now);
            List<Integer> inflight = new ArrayList<>();
            for (int step = 0; step < 4000; step++) {
                now += driver.nextInt(50);
                // Some calls in flight end.
                while (!inflight.isEmpty() && driver.nextInt(100) < 60) {
                    int k = driver.nextInt(inflight.size());
                    int i = inflight.remove(k);
                    long elapsed = base[i] / 2 + (long) (driver.nextDouble() * base[i]);
                    boolean answered = driver.nextInt(100) >= failPct[i];
                    active[i]--;
                    if (answered) {
                        succeeded[i]++;
                        succeededElapsed[i] += elapsed;
                        consumerSuccess[i]++;
                        setProviderMetrics(i, now, elapsed / 1000);
                    } else {
                        errorReq[i]++;
                    }
                    System.out.println("E " + i + " " + elapsed + " " + (answered ? 1 : 0) + " " + now);
                }
                // A pick over all providers, or a routed subset.
                int mask = (1 << n) - 1;
                if (driver.nextInt(100) < 35) {
                    mask = driver.nextInt(1 << n);
                    if (mask == 0) mask = 1 << driver.nextInt(n);
                }
                List<Integer> invokers = new ArrayList<>();
                for (int i = 0; i < n; i++) if ((mask & (1 << i)) != 0) invokers.add(i);
                int chosen = kind.equals("adaptive") ? adaptive(invokers, now) : shortestResponse(invokers, now);
                active[chosen]++;
                inflight.add(chosen);
                System.out.println("P " + mask + " " + now + " " + chosen);
            }
        }
    }
}
