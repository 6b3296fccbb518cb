"""Creates a PyTorchJob with the Kubeflow Training SDK, as its users do; prints JSON.

Usage: create_pytorchjob.py KUBECONFIG NAMESPACE NAME MASTERS IMAGE

Prints {"created": <the job read back with TrainingClient.get_job>} when the apiserver
admits it, or {"error_type": ..., "error": ...} with the exception the SDK raised.
"""
import json
import sys

from kubeflow.training import TrainingClient, models
from kubernetes.client import V1Container, V1ObjectMeta, V1PodSpec, V1PodTemplateSpec

kubeconfig, namespace, name, masters, image = sys.argv[1:6]


def replica(count):
    container = V1Container(
        name="pytorch", image=image, command=["python", "/workspace/train.py"]
    )
    return models.KubeflowOrgV1ReplicaSpec(
        replicas=count,
        restart_policy="OnFailure",
        template=V1PodTemplateSpec(spec=V1PodSpec(containers=[container])),
    )


job = models.KubeflowOrgV1PyTorchJob(
    api_version="kubeflow.org/v1",
    kind="PyTorchJob",
    metadata=V1ObjectMeta(name=name),
    spec=models.KubeflowOrgV1PyTorchJobSpec(
        pytorch_replica_specs={"Master": replica(int(masters)), "Worker": replica(2)},
        run_policy=models.KubeflowOrgV1RunPolicy(),
    ),
)

client = TrainingClient(config_file=kubeconfig, namespace=namespace)
try:
    client.create_job(job=job)
except Exception as e:  # the SDK wraps the apiserver's answer in RuntimeError
    print(json.dumps({"error_type": type(e).__name__, "error": str(e)}))
    sys.exit(0)
created = client.get_job(name=name, job_kind="PyTorchJob")
print(json.dumps({"created": client.api_client.sanitize_for_serialization(created)}))
