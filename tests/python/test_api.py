"""The module's behaviour beyond the CLI's numbers: plans, frames, errors as Python exceptions,
progress, Ctrl-C with a partial result, and the GIL released while a replay runs."""

import json
import os
import signal
import threading
import time

import pandas as pd
import pytest

import prefixsim

KIMI = ("kimi-k3-like", "kimi-k3-dspark")
CHAT = "traces/sample_chat.jsonl"


def test_resolve_the_readme_case():
    old = prefixsim.resolve(*KIMI, "old")
    new = prefixsim.resolve(*KIMI, "new")
    assert (old.S, old.H, old.A) == (13824, 192, 13824)
    assert (new.S, new.H, new.A) == (1536, 1536, 1536)
    assert old.startup_check["ok"] and new.startup_check["performed"]
    kinds = {g["kind"] for g in new.groups}
    assert "sliding_window" in kinds and "mla" in kinds
    assert list(new.groups_frame.columns)[:2] == ["kind", "num_layers"]
    assert "hit alignment A = 1536" in str(new)


def test_result_frames(repo):
    result = prefixsim.replay(repo / CHAT, *KIMI, "new", replicas=2, router="round_robin")
    requests = result.requests
    assert len(requests) == result.summary["requests"] == 400
    assert requests["id"].tolist() == list(range(400))
    assert str(requests["miss_cause"].dtype) == "category"
    assert str(requests["evicted_tokens"].dtype) == "Int64"
    # Every admission's tokens split into causes that add up to its prompt's lookups.
    cause_columns = [c for c in requests.columns if c.endswith("_tokens") and c not in (
        "prompt_tokens", "output_tokens", "hit_tokens", "alignment_loss_tokens",
        "lost_to_alignment_tokens", "readmission_hit_tokens", "routing_regret_tokens")]
    looked_up = requests[cause_columns].sum(axis=1) + requests["hit_tokens"]
    served = requests["skipped"].isna()
    assert (looked_up[served] == requests.loc[served, "prompt_tokens"]).all()
    assert list(result.replicas["replica"]) == [0, 1]
    assert len(result.groups) == len(prefixsim.resolve(*KIMI, "new").groups)
    assert result.miss_causes["hit"] == result.summary["prefix_cache"]["hits"]
    assert result.requests is requests  # built once


def test_single_engine_replicas_frame(repo):
    result = prefixsim.replay(repo / CHAT, *KIMI, "new", max_requests=50, requests=False)
    assert len(result.replicas) == 1
    with pytest.raises(ValueError, match="requests=True"):
        result.requests


def test_html_page(repo, tmp_path):
    ab = prefixsim.compare(repo / CHAT, *KIMI, policies="old,new", max_requests=120)
    page = tmp_path / "ab.html"
    ab.to_html(page, capacities=["8GiB"])
    text = page.read_text()
    assert "<svg" in text and "old" in text and "new" in text
    # The page's capacity chart has the configured size and the one asked for.
    assert "8GiB" in text or "8 GiB" in text or "8589934592" in text or "8.0 GiB" in text


def test_bad_input_names_the_field(repo):
    trace = repo / CHAT
    with pytest.raises(ValueError, match="`block_size` must be positive"):
        prefixsim.replay(trace, *KIMI, block_size=0)
    with pytest.raises(ValueError, match="`max_requests` must be non-negative"):
        prefixsim.replay(trace, *KIMI, max_requests=-1)
    with pytest.raises(ValueError, match="`kv_cache_bytes`"):
        prefixsim.replay(trace, *KIMI, kv_cache_bytes="lots")
    with pytest.raises(ValueError, match="`replicas`"):
        prefixsim.replay(trace, *KIMI, replicas=0)
    with pytest.raises(ValueError, match="`router`"):
        prefixsim.replay(trace, *KIMI, replicas=2, router="nearest")
    with pytest.raises(ValueError, match="`policy`: unknown policy 'newer'"):
        prefixsim.replay(trace, *KIMI, "newer")
    with pytest.raises(ValueError, match="`model`"):
        prefixsim.replay(trace, "no-such-model", KIMI[1])
    with pytest.raises(ValueError, match="`kv_cache_dtype`"):
        prefixsim.resolve(*KIMI, kv_cache_dtype="fp7")
    # vLLM's startup memory check, as the CLI refuses the plan.
    with pytest.raises(ValueError, match="Largest max_model_len that fits"):
        prefixsim.replay(trace, "llama-3.1-8b", "llama-3.1-8b", kv_cache_bytes="2GiB")
    with pytest.raises(TypeError, match="did you mean 'block_size'"):
        prefixsim.replay(trace, *KIMI, blok_size=16)


def test_bad_record_names_the_record_and_field():
    records = [{"timestamp": 0, "input_length": 1024, "output_length": 8, "hash_ids": [1, 2]},
               {"timestamp": 5, "input_length": 1024, "output_length": 8, "hash_ids": "x"}]
    with pytest.raises(ValueError, match=r"records\[1\].*hash_ids"):
        prefixsim.replay(records, *KIMI)
    with pytest.raises(ValueError, match=r"records\[0\] must be a dict"):
        prefixsim.replay([3], *KIMI)
    with pytest.raises(ValueError, match="no records"):
        prefixsim.replay([], *KIMI)


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no-such.jsonl"):
        prefixsim.replay(tmp_path / "no-such.jsonl", *KIMI)
    with pytest.raises(FileNotFoundError):
        prefixsim.resolve(str(tmp_path / "model.json"), KIMI[1])
    with pytest.raises(FileNotFoundError):
        prefixsim.analyze(tmp_path / "no-such.jsonl")


def test_progress_callback(repo):
    seen = []
    prefixsim.replay(repo / "traces/real/mooncake_conversation_trace.jsonl.zst", *KIMI,
                     max_requests=3000, progress=seen.append, requests=False)
    assert seen and seen[-1]["done"] and seen[-1]["requests_read"] == 3000
    assert all(set(p) == {"requests_read", "requests_finished", "sim_time_s", "elapsed_s",
                          "done"} for p in seen)


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory):
    """A chat trace long enough that its replay lasts several seconds."""
    path = tmp_path_factory.mktemp("long") / "chat_200k.jsonl"
    prefixsim.gen_trace("chat", seed=3, requests=200000, rate=50.0, out=path)
    return path


def _interrupt_after(seconds):
    timer = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def test_ctrl_c_raises_with_the_partial_result(long_trace):
    started = time.monotonic()
    timer = _interrupt_after(1.0)
    try:
        with pytest.raises(KeyboardInterrupt) as caught:
            prefixsim.replay(long_trace, *KIMI, "new")
    finally:
        timer.cancel()
    assert time.monotonic() - started < 30  # stopped, not run to the end
    assert isinstance(caught.value, prefixsim.ReplayInterrupted)
    partial = caught.value.result
    assert partial.partial and partial.summary["partial"]
    assert partial.summary["interrupted_by"] == "SIGINT"
    s = partial.summary
    assert s["finished_requests"] + s["interrupted_requests"] + sum(
        s["skipped_requests"].values()) == s["requests"]
    assert s["requests"] < 200000
    assert (partial.requests["skipped"] == "interrupted").sum() == s["interrupted_requests"]


def test_ctrl_c_can_return_the_partial_result(long_trace):
    timer = _interrupt_after(1.0)
    try:
        ab = prefixsim.compare(long_trace, *KIMI, on_interrupt="return", requests=False)
    finally:
        timer.cancel()
    assert ab.partial and ab.summary.get("partial")


def test_gil_is_released_during_a_replay(repo):
    done = threading.Event()
    out = {}

    def run():
        out["result"] = prefixsim.replay(
            repo / "traces/real/mooncake_conversation_trace.jsonl.zst", *KIMI, requests=False)
        done.set()

    worker = threading.Thread(target=run)
    worker.start()
    spins = 0
    while not done.is_set():
        spins += 1
    worker.join()
    # A replay of half a second or more: a thread holding the GIL would leave ~nothing to spin.
    assert spins > 100000
    assert out["result"].summary["requests"] == 12031


def test_determinism(repo):
    a = prefixsim.replay(repo / CHAT, *KIMI, "old", seed=5).to_json(include_wall_time=False)
    b = prefixsim.replay(repo / CHAT, *KIMI, "old", seed=5).to_json(include_wall_time=False)
    assert a == b


def test_records_from_a_generator_and_frame_roundtrip():
    records = prefixsim.gen_trace("shared_doc", seed=2, requests=60)
    frame = pd.DataFrame(records)
    a = prefixsim.analyze(frame)
    b = prefixsim.analyze(iter(records))
    assert a.to_json() == b.to_json()
    assert json.loads(a.to_json())["requests"] == 60


def test_offload_tiers_split_the_hit(repo):
    # A small GPU pool in front of a CPU tier (docs/offload.md): the per-request columns split
    # each request's hit into the GPU's share and the CPU tier's, and add up to the summary's.
    result = prefixsim.replay(repo / CHAT, "llama-3.1-8b", "llama-3.1-8b", "new",
                              num_gpu_blocks=2000, kv_offloading_size=4)
    offload = result.summary["offload"]
    assert offload["tiers"][0]["medium"] == "CPU"
    requests = result.requests
    served = requests[requests["skipped"].isna()]
    assert (served["gpu_hit_tokens"] + served["cpu_hit_tokens"] == served["hit_tokens"]).all()
    assert requests["cpu_hit_tokens"].sum() == offload["tiers"][0]["hit_tokens"] > 0
    # The causes count the tier's tokens as hits, and split what was evicted by the tier's fate.
    assert result.miss_causes["hit"] == result.summary["prefix_cache"]["hits"]
    attributed = served[served["miss_cause"].notna()]
    split = attributed["tier_evicted_tokens"] + attributed["tier_not_stored_tokens"]
    assert (split == attributed["evicted_tokens"]).all()
    with pytest.raises(ValueError, match="kv_offload_slot_sizing"):
        prefixsim.replay(repo / CHAT, *KIMI, kv_offloading_size=4, kv_offload_slot_sizing="bogus")
