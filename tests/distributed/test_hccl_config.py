"""HCCL configuration for the acl device: rank-table JSON format and environment."""

from __future__ import annotations

import json

import pytest

from npu_inductor.runtime import collectives as comm

HCCL_VARS = ("RANK_TABLE_FILE", "RANK_ID", "RANK_SIZE", "DEVICE_ID", "HCCL_CONNECT_TIMEOUT",
             "HCCL_EXEC_TIMEOUT", "HCCL_BUFFSIZE")


def _all_strings(x) -> bool:
    if isinstance(x, dict):
        return all(isinstance(k, str) and _all_strings(v) for k, v in x.items())
    if isinstance(x, list):
        return all(_all_strings(v) for v in x)
    return isinstance(x, str)


def test_single_server_rank_table():
    table = comm.rank_table(2)
    assert table == {"status": "completed", "version": "1.0", "server_count": "1",
                     "server_list": [{"server_id": "node_0", "device": [
                         {"device_id": "0", "rank_id": "0"},
                         {"device_id": "1", "rank_id": "1"}]}]}


def test_multi_server_rank_table_is_all_strings_and_contiguous():
    ips = {r: f"127.0.{r // 2}.{8 + r % 2}" for r in range(4)}  # only written into the JSON
    table = comm.rank_table(4, devices_per_server=2, device_ips=ips)
    assert _all_strings(table) and json.loads(json.dumps(table)) == table
    assert table["server_count"] == "2"
    ranks = [d["rank_id"] for s in table["server_list"] for d in s["device"]]
    assert ranks == ["0", "1", "2", "3"]
    assert [d["device_id"] for d in table["server_list"][1]["device"]] == ["0", "1"]
    assert table["server_list"][1]["device"][1]["device_ip"] == "127.0.1.9"
    assert len({s["server_id"] for s in table["server_list"]}) == 2


def test_rank_table_rejects_uneven_servers():
    with pytest.raises(ValueError, match="do not fill servers"):
        comm.rank_table(3, devices_per_server=2)


def test_hccl_env_values_and_ranges():
    env = comm.hccl_env(1, 2, "/tmp/rt.json", connect_timeout_s=300, buffsize_mb=64)
    assert env == {"RANK_TABLE_FILE": "/tmp/rt.json", "RANK_ID": "1", "RANK_SIZE": "2",
                   "DEVICE_ID": "1", "HCCL_CONNECT_TIMEOUT": "300",
                   "HCCL_EXEC_TIMEOUT": "1836", "HCCL_BUFFSIZE": "64"}
    with pytest.raises(ValueError, match=r"HCCL_CONNECT_TIMEOUT must be in \[120, 7200\]"):
        comm.hccl_env(0, 2, "rt.json", connect_timeout_s=60)
    with pytest.raises(ValueError, match="HCCL_BUFFSIZE"):
        comm.hccl_env(0, 2, "rt.json", buffsize_mb=0)
    with pytest.raises(ValueError, match="HCCL_CONNECT_TIMEOUT < HCCL_EXEC_TIMEOUT"):
        comm.hccl_env(0, 2, "rt.json", connect_timeout_s=600, exec_timeout_s=300)


def test_prepare_acl_hccl_writes_table_and_env(tmp_path, monkeypatch):
    for var in HCCL_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HCCL_BUFFSIZE", "32")  # what the user set wins
    env = comm.prepare_acl_hccl(str(tmp_path), rank=1, world_size=2, local_world_size=2)
    table = json.loads((tmp_path / "rank_table_2.json").read_text())
    assert table == comm.rank_table(2)
    assert env["RANK_TABLE_FILE"] == str(tmp_path / "rank_table_2.json")
    assert env["RANK_ID"] == "1" and env["HCCL_BUFFSIZE"] == "32"
    assert not list(tmp_path.glob("*.tmp"))


def test_exec_timeout_env(monkeypatch):
    monkeypatch.setenv("HCCL_EXEC_TIMEOUT", "7")
    assert comm.exec_timeout_s() == 7
    monkeypatch.setenv("HCCL_EXEC_TIMEOUT", "0")  # HCCL's "never": the group's own timeout
    assert comm.exec_timeout_s() is None


def test_multi_server_rank_table_needs_every_device_ip():
    with pytest.raises(ValueError, match=r"device_ip for every device.*\[2, 3\]"):
        comm.rank_table(4, devices_per_server=2, device_ips={0: "10.0.0.1", 1: "10.0.0.2"})


def test_prepare_acl_hccl_lists_device_ips_from_hccn_conf(tmp_path, monkeypatch):
    for var in HCCL_VARS:
        monkeypatch.delenv(var, raising=False)
    conf = tmp_path / "hccn.conf"
    conf.write_text("address_0=192.168.1.8\nnetmask_0=255.255.255.0\naddress_1=192.168.1.9\n")
    monkeypatch.setattr(comm, "HCCN_CONF", str(conf))
    comm.prepare_acl_hccl(str(tmp_path), rank=0, world_size=2, local_world_size=2)
    table = json.loads((tmp_path / "rank_table_2.json").read_text())
    devices = table["server_list"][0]["device"]
    assert [(d["device_id"], d["device_ip"], d["rank_id"]) for d in devices] == [
        ("0", "192.168.1.8", "0"), ("1", "192.168.1.9", "1")]
