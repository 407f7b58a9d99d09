"""Phase timings: named phases in the build log and for the manifest."""

from __future__ import annotations

from pathlib import Path

from wheelfactory.support.timeline import Timeline, marker_command, markers, split_by_markers


def test_phases_add_up_in_order_and_are_stamped_into_the_log(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    heard: list[str] = []
    timeline = Timeline(None, heard.append)
    with timeline.phase("image"):
        pass
    timeline.attach(log)  # the phases before the log existed are stamped too
    with timeline.phase("smoke"):
        pass
    timeline.add("compile", 2.5)
    timeline.add("smoke", 1.0)
    assert list(timeline.phases) == ["image", "smoke", "compile"]
    assert timeline.phases["compile"] == 2.5 and timeline.phases["smoke"] >= 1.0
    assert heard == ["image", "smoke"]
    text = log.read_text()
    assert "phase image: 0.0 s" in text and "phase smoke started" in text and "phase compile: 2.5 s" in text
    assert text.splitlines()[0].startswith("# [") and "] phase " in text.splitlines()[0]


def test_a_failing_phase_is_still_timed(tmp_path: Path) -> None:
    timeline = Timeline(tmp_path / "log")
    try:
        with timeline.phase("compile"):
            raise RuntimeError("compiler error")
    except RuntimeError:
        pass
    assert "compile" in timeline.phases


def test_markers_split_a_container_span_into_phases() -> None:
    output = ("cibuildwheel output\nwheelfactory-phase compile 105.5\nc++ -O2 ...\n"
              "  wheelfactory-phase repair 130.0  \nwheelfactory-phase broken x\nauditwheel ...\n")
    assert markers(output) == [("compile", 105.5), ("repair", 130.0)]
    assert split_by_markers(100.0, 131.5, "container", output) == [
        ("container", 5.5), ("compile", 24.5), ("repair", 1.5)]
    # markers outside the span (clock skew) never give a negative phase
    assert all(s >= 0 for _, s in split_by_markers(110.0, 120.0, "container", output))
    assert split_by_markers(0.0, 3.0, "container", "no markers") == [("container", 3.0)]


def test_the_marker_command_prints_what_markers_reads() -> None:
    import subprocess

    printed = subprocess.run(["sh", "-c", marker_command("compile")], capture_output=True, text=True, check=True).stdout
    ((name, instant),) = markers(printed)
    assert name == "compile" and instant > 1.6e9
