"""A random API sequence (issue 17): borrow, return, DMA map and unmap, NTB link down and up, and
the injected faults (host crash and reboot, surprise removal and the slot back, port down and up, a
hung device, poisoned completions) in any order on a small part of the four-server cluster. After
every step nothing is programmed that no lend owns (devlend-host's leftover checker,
`Pool.leftovers`: NTB translations, LUT entries, IOMMU context entries and mapped bytes); with
nothing borrowed the fabric is programmed exactly as it was at the start. Examples are bounded so
CI stays fast."""

from hypothesis import given, settings, strategies as st, HealthCheck

from devlend import Pool, PoolError
from conftest import topo_path

FOUR = topo_path("four-server-cluster.yaml")
DEVICES = ["gpu0", "gpu1", "gpu2"]            # gpu0, gpu1 in server1; gpu2 in server2
BORROWERS = ["server2", "server3"]
NTBS = ["ntb-1-2", "ntb-1-3", "ntb-2-3"]

step = st.one_of(
    st.tuples(st.just("borrow"), st.sampled_from(BORROWERS), st.sampled_from(DEVICES)),
    st.tuples(st.just("return"), st.sampled_from(DEVICES)),
    st.tuples(st.just("map"), st.sampled_from(DEVICES), st.sampled_from([0x1000, 0x3000, 0x20_0000])),
    st.tuples(st.just("unmap"), st.sampled_from(DEVICES)),
    st.tuples(st.just("down"), st.sampled_from(NTBS)),
    st.tuples(st.just("up"), st.sampled_from(NTBS)),
    st.tuples(st.just("fault"), st.sampled_from(["host-crash", "host-reboot"]), st.sampled_from(["server1", "server2", "server3"])),
    st.tuples(st.just("fault"), st.sampled_from(["surprise-removal", "port-down", "port-up", "completion-timeout", "poisoned"]),
              st.sampled_from(DEVICES)),
)


def fresh() -> Pool:
    p = Pool(FOUR)
    for lender, borrower in [("server1", "server2"), ("server1", "server3"), ("server2", "server3")]:
        p.connect(lender, borrower)
    for d in DEVICES:
        p.add(d).available(d)
    return p


def check(p: Pool, base: dict, maps: dict) -> None:
    lends = {d: p.show(d).get("lend") for d in DEVICES}
    live = {d: l for d, l in lends.items() if l}
    assert p.leftovers() == [], "programmed, and no lend owns it"
    for d, l in live.items():
        assert l["dma_maps"] == len(maps.get(d, [])), f"{d}: the driver's mappings"
    if not live:
        assert p.programmed() == base and p.idle, "nothing borrowed, yet the fabric is not as it started"
    assert p.anomalies() == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=25))
def test_random_sequences_leave_nothing_mapped_that_no_lend_owns(steps):
    p = fresh()
    base = p.programmed()
    maps: dict = {}
    for s in steps:
        kind = s[0]
        try:
            if kind == "borrow":
                p.borrow(s[1], s[2])
            elif kind == "return":
                if maps.get(s[1]):
                    for dma, size in maps.pop(s[1]):
                        p.dma_unmap(s[1], dma, size)
                p.return_device(s[1])
            elif kind == "map":
                maps.setdefault(s[1], []).append((p.dma_map(s[1], s[2]), s[2]))
            elif kind == "unmap":
                if maps.get(s[1]):
                    dma, size = maps[s[1]].pop()
                    p.dma_unmap(s[1], dma, size)
            elif kind == "fault":
                for lend in p.fault(s[1], s[2]):
                    maps.pop(lend["device"], None)  # the lend ended, and its mappings with it
            elif kind == "down":
                p.link_down(s[1])
            else:
                p.link_up(s[1])
        except PoolError:
            pass  # refused (not borrowed, already borrowed, link down): must change nothing
        check(p, base, maps)
    for d in DEVICES:
        for dma, size in maps.pop(d, []):
            p.dma_unmap(d, dma, size)
        try:
            p.return_device(d)
        except PoolError:
            pass
    check(p, base, maps)
    assert p.programmed() == base
