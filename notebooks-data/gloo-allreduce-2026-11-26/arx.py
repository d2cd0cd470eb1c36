"""Where DDP's 2.3 ms all-reduce tail goes: two pinned gloo ranks (one thread each), cnn at 256.
Modes, alternated per iteration: 'hot' = barrier, all_reduce(247 KB) (the profiler's sweep);
'after' = forward+backward, then all_reduce at once (arrival skew included);
'after_barrier' = forward+backward, barrier (timed: barrier_after), then all_reduce;
'after_tiny' = forward+backward, all_reduce of 4 B (tiny_after), then of 247 KB (big_after_tiny);
'spin' / 'sleep' = barrier, 17 ms of spinning / sleeping, then all_reduce(247 KB).
Prints each rank's medians (ms), the median arrival skew of 'after', and rank 0's 'after' wait
less the skew. Usage: GLIBC_TUNABLES=glibc.malloc.hugetlb=1 /usr/bin/python3 arx.py"""
import os, sys, time, json, statistics as st
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import hetsim_profile as hp
hp.limit_blas_pool(1)
import torch.multiprocessing as mp

def rank_main(rank, init, q):
    import torch, torch.distributed as dist, torch.nn.functional as F
    hp.setup_process(1, [rank])
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    ms = hp.ModelSpec("cnn", None, None, None, None)
    torch.manual_seed(1)
    net = ms.build()
    x = torch.randn((256,) + tuple(ms.input)); y = torch.randint(0, 10, (256,))
    buf = torch.ones(247 * 1024 // 4)
    pc = time.perf_counter
    tiny = torch.ones(1)
    res = {"hot": [], "after": [], "after_barrier": [], "barrier_after": [], "tiny_after": [],
           "big_after_tiny": [], "skew": []}
    for it in range(180):
        mode = ("hot", "after", "after_barrier", "after_tiny", "spin", "sleep")[it % 6]
        if mode in ("spin", "sleep"):
            dist.barrier()
            e = pc() + 0.017
            if mode == "spin":
                while pc() < e: pass
            else:
                time.sleep(0.017)
            t0 = pc(); dist.all_reduce(buf); t1 = pc()
            if it >= 6: res.setdefault(mode, []).append((t1 - t0) * 1e3)
            continue
        if mode == "hot":
            dist.barrier(); t0 = pc(); dist.all_reduce(buf); t1 = pc()
        else:
            dist.barrier()
            F.cross_entropy(net(x), y).backward()
            if mode == "after_barrier":
                b0 = pc(); dist.barrier()
                if it >= 6: res["barrier_after"].append((pc() - b0) * 1e3)
            if mode == "after_tiny":
                b0 = pc(); dist.all_reduce(tiny); b1 = pc(); dist.all_reduce(buf); b2 = pc()
                if it >= 6:
                    res["tiny_after"].append((b1 - b0) * 1e3)
                    res["big_after_tiny"].append((b2 - b1) * 1e3)
                continue
            w0 = time.time(); t0 = pc(); dist.all_reduce(buf); t1 = pc()
            if mode == "after" and it >= 6: res["skew"].append(w0)
        if it >= 6:
            res[mode].append((t1 - t0) * 1e3)
    arr = res.pop("skew")
    q.put((rank, ({k: st.median(v) for k, v in res.items() if v}, arr, res["after"])))

if __name__ == "__main__":
    ctx = mp.get_context("spawn"); q = ctx.Queue()
    init = "file://%s/hetsim-arx-init-%d" % (os.environ.get("TMPDIR", "/tmp"), os.getpid())
    ps = [ctx.Process(target=rank_main, args=(r, init, q)) for r in (0, 1)]
    for p in ps: p.start()
    out = dict(q.get() for _ in ps)
    for p in ps: p.join()
    a0, a1 = out[0][1], out[1][1]
    skew = [abs(x - y) * 1e3 for x, y in zip(a0, a1)]
    print({r: out[r][0] for r in out}, "median |arrival skew| ms %.2f" % st.median(skew),
          "after-wait minus skew, rank0 (ms): %.2f" % st.median([w - max(0, (a1[i] - a0[i]) * 1e3) for i, w in enumerate(out[0][2])]))
