"""The module gives the CLI's numbers: the same inputs through `prefixsim replay|compare|analyze|
gen-trace` and through the module give the same JSON, byte for byte, and the request frame holds
the `--csv` rows."""

import json

import numpy as np
import pandas as pd
import pytest

import prefixsim

KIMI = ("kimi-k3-like", "kimi-k3-dspark")

# (trace, model, engine, policy, module keywords, the same as CLI flags)
CASES = [
    ("traces/sample_chat.jsonl", *KIMI, "new", {}, []),
    ("traces/sample_chat.jsonl", *KIMI, "old", {}, []),
    ("traces/sample_agentic.jsonl", "gpt-oss-20b", "gpt-oss-20b", "new", {}, []),
    ("traces/sample_shared_doc.jsonl", "llama-3.1-8b", "llama-3.1-8b", "old",
     {"kv_cache_bytes": "4GiB", "max_model_len": 16384, "max_requests": 150},
     ["--kv-cache-bytes", "4GiB", "--max-model-len", "16384", "--max-requests", "150"]),
    ("traces/sample_chat.jsonl", *KIMI, "new",
     {"replicas": 3, "router": "kv_aware"}, ["--replicas", "3", "--router", "kv_aware"]),
    ("traces/real/mooncake_synthetic_trace.jsonl.zst", *KIMI, "new", {"max_requests": 800},
     ["--max-requests", "800"]),
    ("traces/sample_shared_doc.jsonl", *KIMI, "old",
     {"replicas": "auto", "router": "session", "ttft_slo_ms": 2000},
     ["--replicas", "auto", "--router", "session", "--ttft-slo-ms", "2000"]),
]


def _cli_replay(cli, tmp_path, trace, model, engine, policy, flags):
    json_path, csv_path = tmp_path / "cli.json", tmp_path / "cli.csv"
    cli("replay", "--trace", trace, "--model", model, "--engine", engine, "--policy", policy,
        "--json", json_path, "--csv", csv_path, "--no-wall-time", "--no-progress", *flags)
    return json_path.read_text(), csv_path


def assert_frame_matches_csv(frame, csv_path):
    csv = pd.read_csv(csv_path, keep_default_na=True)
    assert list(frame.columns) == list(csv.columns)
    assert len(frame) == len(csv)
    # The CSV rounds times: arrival to 1 us, TTFT and end-to-end to 1 us (ms with 3 decimals).
    tolerance = {"arrival_s": 5e-7, "ttft_ms": 5e-4, "e2e_ms": 5e-4}
    for name in csv.columns:
        ours, theirs = frame[name], csv[name]
        if name in ("skipped", "miss_cause"):
            assert (ours.astype(object).where(ours.notna(), "").tolist() ==
                    theirs.fillna("").astype(str).tolist()), name
            continue
        assert ours.isna().tolist() == theirs.isna().tolist(), name
        a = ours.dropna().to_numpy(dtype=float)
        b = theirs.dropna().to_numpy(dtype=float)
        np.testing.assert_allclose(a, b, rtol=0, atol=tolerance.get(name, 0), err_msg=name)


@pytest.mark.parametrize("trace,model,engine,policy,keywords,flags", CASES)
def test_replay_matches_cli(cli, tmp_path, repo, trace, model, engine, policy, keywords, flags):
    cli_json, csv_path = _cli_replay(cli, tmp_path, trace, model, engine, policy, flags)
    result = prefixsim.replay(repo / trace, model, engine, policy, **keywords)
    ours = result.to_json(include_wall_time=False)
    assert ours == cli_json  # byte for byte, key order included
    summary = dict(result.summary)
    assert "wall_time_s" in summary  # to_json() and .summary keep it by default, as the CLI does
    del summary["wall_time_s"]
    assert summary == json.loads(cli_json)
    assert_frame_matches_csv(result.requests, csv_path)
    assert result.to_csv() == csv_path.read_text()


def test_records_replay_as_the_file(cli, tmp_path, repo):
    """A trace given as dicts (and as a DataFrame of them) is the file's trace."""
    path = repo / "traces/sample_chat.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    cli_json, csv_path = _cli_replay(cli, tmp_path, "traces/sample_chat.jsonl", *KIMI, "new", [])
    from_dicts = prefixsim.replay(records, *KIMI, "new")
    assert from_dicts.to_json(include_wall_time=False) == cli_json
    assert_frame_matches_csv(from_dicts.requests, csv_path)
    from_frame = prefixsim.replay(pd.DataFrame(records), *KIMI, "new")
    assert from_frame.to_json(include_wall_time=False) == cli_json
    from_generator = prefixsim.replay((r for r in records), *KIMI, "new")
    assert from_generator.to_json(include_wall_time=False) == cli_json


def test_records_through_a_fleet_search(cli, repo):
    """The fleet search reads the trace once per size it tries: the records as often."""
    path = repo / "traces/sample_shared_doc.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    cli_auto = cli("replay", "--trace", path, "--model", KIMI[0], "--engine", KIMI[1],
                   "--replicas", "auto", "--ttft-slo-ms", "2000", "--json", "-",
                   "--no-wall-time", "--no-progress").decode()
    auto = prefixsim.replay(records, *KIMI, "new", replicas="auto", ttft_slo_ms=2000)
    assert auto.to_json(include_wall_time=False) == cli_auto
    assert len(auto.summary["fleet"]["auto"]["probes"]) > 1


def test_compare_matches_cli(cli, repo):
    cli_json = cli("compare", "--trace", "traces/sample_chat.jsonl", "--model", KIMI[0],
                   "--engine", KIMI[1], "--policies", "old,new", "--json", "-", "--no-wall-time",
                   "--no-progress").decode()
    ab = prefixsim.compare(repo / "traces/sample_chat.jsonl", *KIMI, policies=["old", "new"])
    assert ab.to_json(include_wall_time=False) == cli_json
    assert list(ab.results) == ["old", "new"]
    # The README's figures: 4.57% under old, 52.55% under new.
    assert round(100 * ab["old"].hit_rate, 2) == 4.57
    assert round(100 * ab["new"].hit_rate, 2) == 52.55
    deltas = ab.deltas
    assert len(deltas) == 1 and deltas.loc[0, "policy"] == "new"
    first = json.loads(cli_json)["deltas"][0]
    assert deltas.loc[0, "hit_rate_pp"] == pytest.approx(first["hit_rate_pp"])
    assert deltas.loc[0, "miss_tokens_by_cause.alignment"] == \
        first["miss_tokens_by_cause"]["alignment"]
    text = cli("compare", "--trace", "traces/sample_chat.jsonl", "--model", KIMI[0],
               "--engine", KIMI[1], "--policies", "old,new", "--no-progress").decode()
    assert ab.text in text


def test_resolve_matches_cli(cli):
    for policy in ("old", "new"):
        cli_json = cli("resolve", "--model", KIMI[0], "--engine", KIMI[1], "--policy", policy,
                       "--json").decode()
        assert prefixsim.resolve(*KIMI, policy).to_dict() == json.loads(cli_json)


def test_analyze_matches_cli(cli, repo):
    cli_json = cli("analyze", "--trace", "traces/sample_chat.jsonl", "--json", "-").decode()
    from_path = prefixsim.analyze(repo / "traces/sample_chat.jsonl")
    assert from_path.to_json() == cli_json
    records = [json.loads(line) for line in
               (repo / "traces/sample_chat.jsonl").read_text().splitlines() if line.strip()]
    assert prefixsim.analyze(records).to_json() == cli_json
    assert list(from_path.alignment_curve.columns)[:2] == ["alignment", "hit_rate"]


def test_gen_trace_matches_cli(cli, tmp_path):
    cli("gen-trace", "--kind", "agentic", "--seed", "7", "--requests", "120", "--out",
        tmp_path / "cli.jsonl")
    out = prefixsim.gen_trace("agentic", seed=7, requests=120, out=tmp_path / "py.jsonl")
    assert (tmp_path / "py.jsonl").read_bytes() == (tmp_path / "cli.jsonl").read_bytes()
    assert out == str(tmp_path / "py.jsonl")
    records = prefixsim.gen_trace("agentic", seed=7, requests=120)
    assert records == [json.loads(line) for line in
                       (tmp_path / "cli.jsonl").read_text().splitlines()]
