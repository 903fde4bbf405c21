from tests.node.conftest import NodeCluster


def test_node_ready(node_cluster: NodeCluster) -> None:
    node = node_cluster.get("node", node_cluster.node.name)
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"] == "containerd://v2.4.2"
