"""The compile cache's key covers the compiler's own source: every module it imports, the
jinja templates the executor, host model and ATC script are rendered from, and the op
tables; editing any of them makes the next compile miss."""

import shutil
import sys
from pathlib import Path

import torch

from npu_inductor import cache_key, codegen
from npu_inductor.compile_fx import record_reports


def test_every_loaded_module_and_template_is_hashed():
    import npu_inductor.backend  # noqa: F401  (the whole compiler, as torch.compile loads it)
    import npu_inductor.runtime.host_codegen  # noqa: F401

    hashed = {path.resolve() for _, path in cache_key.source_files()}
    loaded = {Path(m.__file__).resolve() for name, m in list(sys.modules.items())
              if name.startswith("npu_inductor.") and getattr(m, "__file__", None)
              and not name.startswith("npu_inductor.benchmarks")}
    templates = set(Path(codegen.environment().loader.searchpath[0]).resolve().glob("*.jinja"))
    assert len(templates) >= 3
    specs = {p.resolve() for p in Path(sys.modules["npu_inductor.ge"].__file__).parent.glob(
        "*.json")}
    assert loaded and specs
    assert loaded - hashed == set()
    assert templates - hashed == set()
    assert specs - hashed == set()


def _compile(tmp: Path) -> str:
    torch._dynamo.reset()
    x = torch.randn(3)
    with record_reports() as reports:
        out = torch.compile(lambda t: t * 2 + 1, backend="npu",
                            options={"cache_dir": str(tmp / "cache"), "fallback": "error"})(x)
    torch.testing.assert_close(out, x * 2 + 1)
    (report,) = reports
    return report.cache


def test_editing_a_template_misses(tmp_path, monkeypatch):
    """The key hashes a copy of the installed source; a comment added to a copied template
    (as an upgrade or a local edit would change it) makes the next compile miss."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "torch_cache"))
    copies = []
    for package, folder in cache_key.package_folders():
        copy = tmp_path / "src" / package
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("__pycache__"))
        copies.append((package, copy))
    monkeypatch.setattr(cache_key, "package_folders", lambda: copies)
    cache_key.source_digest.cache_clear()
    try:
        assert _compile(tmp_path) == "miss"
        assert _compile(tmp_path) == "hit"
        template = tmp_path / "src" / "npu_inductor.codegen_templates" / "executor.py.jinja"
        template.write_text(template.read_text() + "{# edited #}\n")
        cache_key.source_digest.cache_clear()
        assert _compile(tmp_path) == "miss"
        assert _compile(tmp_path) == "hit"
    finally:
        cache_key.source_digest.cache_clear()
