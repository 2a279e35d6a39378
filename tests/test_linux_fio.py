"""The linux-fio experiment (issue 28): randread QD1 local and borrowed, in a real Linux guest and on
devlend's model; its own module so that pytest-xdist can run it beside the other guests."""


def test_the_side_by_side_experiment_sees_the_borrowed_path_cost_alike():
    # linux-fio, small: randread QD1 local and borrowed, in a guest and on devlend's model. The
    # borrowed path's extra NTB crossings cost the real driver what they cost devlend's.
    from devlend.experiments import linux_fio
    from devlend import readme_figures
    rows = linux_fio.measure(readme_figures.LINUX_FIO_IOS, jobs=readme_figures.LINUX_FIO_JOBS)
    assert len(rows) == 4 and {r["side"] for r in rows} == {"linux guest", "devlend model"}
    guest, model = (linux_fio.borrowed_minus_local(rows, side) for side in ("linux guest", "devlend model"))
    assert guest > 0 and model > 0, (guest, model)
    assert 0.7 * model <= guest <= 1.3 * model, (guest, model)
    assert all(r["irqs_per_io"] >= 1 for r in rows if r["side"] == "linux guest"), rows
    # The README's linux-fio figures are this run's (scripts/readme-figures --write --only linux-fio).
    with open(readme_figures.README, encoding="utf-8") as fh:
        quoted = readme_figures.blocks(fh.read())["linux-fio"]
    assert quoted == readme_figures.linux_fio_block(rows), "README block linux-fio is stale: run scripts/readme-figures --write --only linux-fio"
