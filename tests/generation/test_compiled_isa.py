"""generation/decode/compiled.py `_isa_probed_once`: inductor's vector-ISA probe runs once per CPU, not once per process."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap

import pytest
import torch

from guitarformer.generation.decode import compiled

pytestmark = pytest.mark.slow  # each test starts fresh processes that compile

x86 = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="inductor probes x86 ISAs only")


@pytest.fixture
def note(tmp_path, monkeypatch):
    """The ISA note's path, in a `_saved_dir` of tmp_path's, as in a process whose first step is still to come."""
    monkeypatch.setattr(compiled, "_saved_dir", lambda: tmp_path)
    monkeypatch.setattr(compiled, "_ISA_SETTLED", [])
    return tmp_path / compiled.ISA_NOTE


@x86
def test_the_probe_is_skipped_only_for_the_cpu_noted(note, monkeypatch) -> None:
    """Inside the context inductor skips its probe (`cpp.vec_isa_ok`) where the note names this CPU's ISA flags, and
    probes as usual (the setting untouched) without a note, with another CPU's, or where the user set it."""
    from torch._inductor import config
    from torch._inductor.cpu_vec_isa import x86_isa_checker

    monkeypatch.setattr(config.cpp, "vec_isa_ok", None)  # as without TORCHINDUCTOR_VEC_ISA_OK
    default = None
    with compiled._isa_probed_once():
        assert config.cpp.vec_isa_ok == default  # no note: probe
    note.unlink(missing_ok=True)  # (noted after the probe: every ISA this CPU lists was found usable)
    compiled._ISA_SETTLED.clear()
    note.write_text(json.dumps({"cpu": ["avx2"] if x86_isa_checker() != ["avx2"] else ["avx512"]}))
    with compiled._isa_probed_once():
        assert config.cpp.vec_isa_ok == default  # another CPU's note
    compiled._ISA_SETTLED.clear()
    note.write_text(json.dumps({"cpu": x86_isa_checker()}))
    with compiled._isa_probed_once():
        assert config.cpp.vec_isa_ok is True
    assert config.cpp.vec_isa_ok == default  # and only inside
    with compiled._isa_probed_once():  # settled for the process: later steps pass through
        assert config.cpp.vec_isa_ok == default
    compiled._ISA_SETTLED.clear()
    with config.patch({"cpp.vec_isa_ok": False}):  # the user's own setting (TORCHINDUCTOR_VEC_ISA_OK=0) stands
        with compiled._isa_probed_once():
            assert config.cpp.vec_isa_ok is False


@x86
@pytest.mark.usefixtures("cxx")
def test_a_later_process_picks_the_probed_isa_without_probing(tmp_path) -> None:
    """A first process probes (a build and a child process per ISA) and notes the CPU; a second one, whose probe
    would fail, picks the same ISA without running it (inductor's extra checks of AVX-512's bf16 and VNNI still run,
    as before)."""
    script = textwrap.dedent("""
        import sys
        from torch._inductor import cpu_vec_isa
        from guitarformer.generation.decode import compiled
        if sys.argv[1] == "second":  # the probe of each ISA fails (not the extra feature checks of some ISAs)
            check_build = cpu_vec_isa.VecISA.check_build
            def probe(self, code):
                if code == cpu_vec_isa.VecISA._avx_code:
                    raise AssertionError("probed")
                return check_build(self, code)
            cpu_vec_isa.VecISA.check_build = probe
        with compiled._isa_probed_once():
            print(cpu_vec_isa.pick_vec_isa())
    """)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}
    env.pop("TORCHINDUCTOR_VEC_ISA_OK", None)

    def run(which: str) -> str:
        out = subprocess.run([sys.executable, "-c", script, which], env=env, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip()

    first = run("first")
    notes = list(tmp_path.glob(f"{compiled.STEPS_FOLDER}/*/{compiled.ISA_NOTE}"))
    assert len(notes) == 1 and first
    assert run("second") == first
    notes[0].unlink()
    with pytest.raises(AssertionError, match="probed"):
        run("second")
