"""A scenario is checked whole at load: what a run would trip over (a value the scenario's rules refuse, an
object the API server would refuse, a scheduler config kube-scheduler would refuse) is `FILE:LINE: …` before
any cluster starts — never a hang, a traceback mid-run, or a workload that silently never arrives."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelite.sim.scenario import ScenarioError, load

POOL = "nodePools:\n  - {name: n, count: 1}\n"
HEAD = "duration: 10m\n" + POOL  # lines 1-3


def _refused(tmp_path: Path, text: str, line: int | str, message: str, file: str = "s.yaml") -> None:
    """`text` as a scenario fails to load, with `FILE:LINE:` (LINE may be LINE:COLUMN) and `message`."""
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as err:
        load(path)
    assert str(err.value).startswith(f"{tmp_path / file}:{line}:"), str(err.value)
    assert message in str(err.value), str(err.value)


def _workload(fields: str) -> str:
    """HEAD and one workload whose fields (a flow mapping's inside) are on line 5."""
    return HEAD + "workloads:\n  - {name: w, kind: Pod, " + fields + "}\n"


DURATION_CASES = [
    pytest.param("duration: -300\n" + POOL, 1, "must be a positive duration", id="a negative number of seconds"),
    pytest.param("duration: 0s\n" + POOL, 1, "must be a positive duration", id="a zero duration never ends"),
    pytest.param(HEAD + "sample: -10\n", 4, "sample: -10 must be a positive duration",
                 id="a negative sample period (once: samples without end, 6 GB in 40 s)"),
    pytest.param(HEAD + "sample: 0s\n", 4, "sample: '0s' must be a positive duration",
                 id="a zero sample period (once: a hang)"),
    pytest.param(HEAD + "sample: .inf\n", 4, "must be a positive duration", id="an infinite duration"),
    pytest.param(_workload("at: -60"), 5, "at: -60 must be a non-negative", id="a negative arrival time"),
    pytest.param(_workload("arrivals: {times: [1m, -5]}"), 5, "arrivals.times: -5 must be a non-negative",
                 id="a negative arrival in a list of times"),
    pytest.param(_workload("arrivals: {poisson: {perHour: 6, start: -1, until: 5m}}"), 5,
                 "arrivals.poisson.start: -1", id="a negative Poisson start"),
    pytest.param(_workload("behaviour: {run: -5}"), 5, "run: -5 must be a non-negative",
                 id="a negative run time (once: a hang)"),
    pytest.param(_workload("behaviour: {run: {exponential: 0s}}"), 5, "run.exponential: '0s' must be a positive",
                 id="an exponential run time's mean must be positive"),
    pytest.param(_workload("behaviour: {run: {uniform: [-1m, 1m]}}"), 5, "run.uniform: '-1m' is not a duration",
                 id="a negative uniform bound"),
    pytest.param(_workload("behaviour: {stopAfter: -3}"), 5, "behaviour.stopAfter: -3", id="a negative stopAfter"),
    pytest.param(_workload("behaviour: {startup: -3}"), 5, "behaviour.startup: -3", id="a negative startup"),
    pytest.param(HEAD + "faults:\n  - {at: -1, nodeLost: n-0}\n", 5, "fault at: -1 must be a non-negative",
                 id="a negative fault time"),
    pytest.param(HEAD + "controllerManager: {nodeMonitorPeriod: 0}\n", 4,
                 "controllerManager.nodeMonitorPeriod: 0 must be a positive", id="a zero controller period"),
]


@pytest.mark.parametrize("text,line,message", DURATION_CASES)
def test_every_duration_is_checked(tmp_path: Path, text: str, line: int, message: str) -> None:
    _refused(tmp_path, text, line, message)


BOUND_CASES = [
    pytest.param(HEAD + "sample: 0.001\n", 4, "at most 100,000", id="a sample period too small for the span"),
    pytest.param(_workload("arrivals: {poisson: {perHour: 1.0e+12, until: 10m}}"), 5, "more than 1,000,000 arrivals",
                 id="a Poisson rate that would fill the memory at load"),
    pytest.param("duration: 5m\nnodePools:\n  - {name: n, count: 1000000000}\n", 2, "more than 100,000",
                 id="a node count that would fill the memory at load"),
]


@pytest.mark.parametrize("text,line,message", BOUND_CASES)
def test_what_load_would_make_is_bounded(tmp_path: Path, text: str, line: int, message: str) -> None:
    _refused(tmp_path, text, line, message)


def test_trace_rows_are_checked_as_durations(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("at,run\n10,5\n-3,5\n")
    _refused(tmp_path, _workload("arrivals: {trace: t.csv}"), 3, "at: -3.0 must be a non-negative", file="t.csv")


API_REFUSAL_CASES = [
    pytest.param("duration: 5m\nnodePools:\n  - {name: n, count: 1, capacity: {cpu: lots}}\n", 3,
                 "status.capacity[cpu]: Node in version \"v1\" cannot be handled as a Node: quantities must match",
                 id="a capacity that is no quantity: the API's quantity parser"),
    pytest.param("duration: 5m\nnodePools:\n  - name: N_ode\n    count: 2\n", 3,
                 'metadata.name: Invalid value: "N_ode-1": a lowercase RFC 1123 subdomain',
                 id="a pool name that makes invalid node names: the API's name validator"),
    pytest.param("duration: 5m\nnodePools:\n  - name: n\n    taints:\n      - {key: k, effect: Sometimes}\n", 5,
                 'spec.taints[0].effect: Unsupported value: "Sometimes"', id="a taint effect the API refuses"),
    pytest.param("duration: 5m\nnodePools:\n  - name: n\n    labels: {\"a b\": x}\n", 4,
                 "metadata.labels: Invalid value: \"a b\"", id="a label key the API refuses"),
    pytest.param("duration: 5m\n" + POOL + "priorityClasses:\n  - metadata: {name: p}\n    value: notanumber\n", 6,
                 "cannot unmarshal string into Go struct field PriorityClass.value of type int32",
                 id="a PriorityClass value that is not a number: its line"),
    pytest.param("duration: 5m\n" + POOL + "priorityClasses:\n  - {metadata: {name: p}, value: 1}\n"
                 "  - {metadata: {name: p}, value: 2}\n", 6, "priorityClasses: 'p' twice (also line 5)",
                 id="a PriorityClass twice"),
    pytest.param("duration: 5m\n" + POOL + "priorityClasses:\n"
                 "  - {metadata: {name: a}, value: 1, globalDefault: true}\n"
                 "  - {metadata: {name: b}, value: 2, globalDefault: true}\n", 6,
                 "PriorityClass a is already marked as default",
                 id="two global defaults: the API's admission"),
    pytest.param("duration: 5m\nnodePools:\n  - {name: n, count: 1}\n  - {name: n, count: 2}\n", 4,
                 "nodePool n: name used twice (also line 3)", id="a pool name twice (once: 'already exists' mid-run)"),
]


@pytest.mark.parametrize("text,line,message", API_REFUSAL_CASES)
def test_nodes_and_priority_classes_the_api_would_refuse(tmp_path: Path, text: str, line: int, message: str) -> None:
    _refused(tmp_path, text, line, message)


SPEC = HEAD + "workloads:\n  - name: w\n    kind: {kind}\n    spec:\n{spec}"  # the spec's fields from line 8
WORKLOAD_SPEC_CASES = [
    pytest.param("Pod", "      resources: {requests: {cpu: \"-1\"}}\n", 8,
                 "spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal "
                 "to 0", id="a negative request: the shorthand's line"),
    pytest.param("Deployment", "      restartPolicy: Sometimes\n", 8, 'Unsupported value: "Sometimes"',
                 id="a restart policy the API refuses: a Deployment's template"),
    pytest.param("Pod", "      containers: [null]\n", 8,
                 "spec.containers[0]: must be a container (a mapping), not null",
                 id="a null container: the run's builder would fill it in"),
    pytest.param("Deployment", "      initContainers: [3]\n", 8,
                 "spec.initContainers[0]: must be a container (a mapping), not int",
                 id="a number as an init container"),
    pytest.param("Pod", "      containers: {name: main}\n", 8,
                 "cannot unmarshal object into Go struct field PodSpec.spec.containers of type []v1.Container",
                 id="containers as a mapping: the type check, not an AttributeError mid-run"),
    pytest.param("Job", "      containers:\n        - name: main\n          resources:\n            limits: {cpu: x}\n",
                 11, "quantities must match", id="a container's bad limit: its own line"),
    pytest.param("StatefulSet", "      containers:\n        - {name: main, resoruces: {}}\n", 9,
                 'unknown field "spec.template.spec.containers[0].resoruces"',
                 id="an unknown field: refused as kubectl's strict validation does"),
    pytest.param("Pod", "      priorityClassName: nosuch\n", 5, "no PriorityClass with name nosuch was found",
                 id="a priority class that does not exist: the API's admission (names no field: the workload's line)"),
    pytest.param("Deployment", "      terminationGracePeriodSeconds: -5\n      containers: [{name: Main}]\n", 9,
                 "spec.template.spec.containers[0].name: Invalid value: \"Main\"",
                 id="a container name the API refuses"),
]


@pytest.mark.parametrize("kind,spec,line,message", WORKLOAD_SPEC_CASES)
def test_workload_objects_the_api_would_refuse(tmp_path: Path, kind: str, spec: str, line: int,
                                               message: str) -> None:
    _refused(tmp_path, SPEC.replace("{kind}", kind).replace("{spec}", spec), line, message)


def test_a_workload_in_a_namespace_no_namespace_can_be_named(tmp_path: Path) -> None:
    """The run creates the namespaces its workloads use (runner._namespaces); a name no Namespace can have is
    refused at load."""
    _refused(tmp_path, _workload("namespace: Shop_1"), 5, 'metadata.namespace: Invalid value: "Shop_1"')


def test_a_workload_name_the_api_refuses(tmp_path: Path) -> None:
    _refused(tmp_path, HEAD + "workloads:\n  - {name: Web_App, kind: Pod}\n", 5,
             'metadata.name: Invalid value: "Web_App"')


def test_a_trace_rows_request_the_api_refuses(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("at,cpu\n10,1\n20,lots\n")
    _refused(tmp_path, _workload("arrivals: {trace: t.csv}"), 5, "a trace row's cpu/memory {'cpu': 'lots'}")


INVALID_FIELD_CASES = [
    pytest.param(HEAD + "nodeConfig: {bogus: 3}\n", 4, "nodeConfig: unknown or not simulated field 'bogus'",
                 id="an unknown nodeConfig field"),
    pytest.param(HEAD + "nodeConfig:\n  evictionHard: {memory.available: 1Mi}\n", 5,
                 "not simulated field 'evictionHard'",
                 id="a nodeConfig field a simulation would ignore"),
    pytest.param(HEAD + "nodeConfig:\n  crashLoopBackOff: {maxContainerRestartPeriod: 1h}\n", 5,
                 "nodeConfig: crashLoopBackOff.maxContainerRestartPeriod: must be between 1s and 300s",
                 id="a nodeConfig value the agent refuses: its line"),
    pytest.param(HEAD + "faults:\n  - at: 1m\n    pdb: {name: p, minAvailable: 1, maxUnavailable: 1}\n", 6,
                 "minAvailable and maxUnavailable cannot be both set",
                 id="a PDB with both minAvailable and maxUnavailable"),
    pytest.param(HEAD + "faults:\n  - at: 1m\n    pdb: {name: p, minAvailabel: 1}\n", 6, "unknown field 'minAvailabel'",
                 id="an unknown PDB field"),
    pytest.param(_workload("at: 11m"), 5, "at: 660 s is after the scenario's end (duration 600 s)",
                 id="an arrival after the end"),
    pytest.param(HEAD + "faults:\n  - {at: 1h, nodeLost: n-0}\n", 5, "fault at: 3600 s is after the scenario's end",
                 id="a fault after the end"),
    pytest.param(_workload("arrivals: {poisson: {perHour: 6, start: 8m, until: 2m}}"), 5,
                 "until (120 s) must be after start (480 s)", id="a Poisson window that ends before it starts"),
    pytest.param(_workload("behaviour: {run: {uniform: [3m, 1m]}}"), 5, "low must not be above high",
                 id="a uniform range upside down"),
    pytest.param(_workload("at: 1m, arrivals: {times: [2m]}"), 5, "`at` or `arrivals`, not both",
                 id="at together with arrivals"),
    pytest.param(_workload("arrivals: {times: [1m], poisson: {perHour: 1, until: 2m}}"), 5,
                 "exactly one of times, poisson, trace", id="two arrival processes"),
    pytest.param(_workload("replicas: 5"), 5, "a Pod has no replicas", id="replicas on a Pod"),
    pytest.param(HEAD + "workloads:\n  - {name: w, kind: Deployment, completions: 2}\n", 5,
                 "completions is a Job's field, not a Deployment's", id="a Job's field on a Deployment"),
    pytest.param(HEAD + "workloads:\n  - {name: w, kind: Job, backoffLimit: yes}\n", 5,
                 "backoffLimit must be a non-negative integer, not True", id="a Job field that is a bool"),
    pytest.param(_workload("behaviour: {exitCodes: [true]}"), 5, "exitCodes: a non-empty list of integers",
                 id="an exit code that is a bool"),
    pytest.param(_workload("behaviour: {ignoreTerm: sometimes}"), 5, "ignoreTerm: true or false",
                 id="ignoreTerm not a bool"),
    pytest.param(_workload("namespace: 7"), 5, "namespace must be a string", id="a namespace that is a number"),
    pytest.param(HEAD + "workloads:\n  - {name: w, kind: Pod}\nfaults:\n"
                 "  - {at: 1m, scale: {workload: w, replicas: 3}}\n",
                 7, "w is a Pod; only a Deployment or StatefulSet has replicas", id="scale of a Pod"),
    pytest.param(HEAD + "workloads:\n  - {name: j, kind: Job}\nfaults:\n"
                 "  - {at: 1m, scale: {workload: j, replicas: 3}}\n",
                 7, "j is a Job", id="scale of a Job"),
    pytest.param(HEAD + "workloads:\n  - {name: w}\nfaults:\n  - {at: 1m, scale: {workload: w, replicas: true}}\n",
                 7, "replicas must be a non-negative integer, not True", id="scale to a bool"),
    pytest.param(HEAD + "faults:\n  - {at: 1m, delete: nonamespace}\n", 5, "not a pod as NAMESPACE/NAME",
                 id="delete without a namespace"),
    pytest.param(HEAD + "faults:\n  - {at: 1m, delete: Default/x}\n", 5, "not a pod as NAMESPACE/NAME",
                 id="delete with a namespace that cannot be one"),
    pytest.param(HEAD + "timeline: nosuch\n", 4, "timeline: must be a list of strings", id="timeline as a string"),
    pytest.param("duration: 5m\nnodePools:\n  - {name: n, count: true}\n", 3,
                 "count must be a positive integer, not True", id="a count that is a bool"),
    pytest.param("duration: 5m\nnodePools:\n  - name: n\n    capacity: {cpus: \"4\"}\n", 4,
                 "capacity 'cpus': not a resource the scheduler knows", id="an unknown capacity key"),
    pytest.param("duration: 5m\nnodePools:\n  - name: n\n    capacity: {kubernetes.io/gpu: \"4\"}\n", 4,
                 "capacity 'kubernetes.io/gpu'", id="an extended resource in the kubernetes.io domain"),
    pytest.param(HEAD + "schedulerConfig: nosuch.yaml\n", 4, "schedulerConfig: no file",
                 id="a missing scheduler config"),
    pytest.param(HEAD + "schedulerConfig: {a: b}\n", 4, "a file name or a list of file names",
                 id="a scheduler config that is not a file name"),
    pytest.param(HEAD + "workloads:\n  - {name: j, kind: Job, behaviour: {exitCodes: [1, 1, 0]}}\n", 5,
                 "with restartPolicy Never a container runs once",
                 id="exit codes past the first under restartPolicy Never would never be used"),
]


@pytest.mark.parametrize("text,line,message", INVALID_FIELD_CASES)
def test_invalid_fields_are_refused(tmp_path: Path, text: str, line: int, message: str) -> None:
    _refused(tmp_path, text, line, message)


VALID_CASES = [
    pytest.param(_workload("at: 10m"), id="an arrival at the very end"),
    pytest.param(_workload("arrivals: {poisson: {perHour: 60, until: 1h}}"), id="a Poisson window past the end is cut"),
    pytest.param(_workload("behaviour: {run: {uniform: [1m, 1m]}}"), id="a uniform range of one value"),
    pytest.param(_workload("behaviour: {run: 0}"), id="a run time of 0 exits at once"),
    pytest.param("duration: 5m\nnodePools:\n  - name: n\n    capacity: {example.com/gpu: \"2\", hugepages-2Mi: 1Gi}\n",
                 id="extended resources and huge pages"),
    pytest.param(HEAD + "workloads:\n  - {name: j, kind: Job, spec: {restartPolicy: OnFailure}, "
                 "behaviour: {exitCodes: [1, 1, 0]}}\n", id="exit codes through restarts under OnFailure"),
    pytest.param(HEAD + "workloads:\n  - {name: w, kind: Deployment, replicas: 2}\n"
                 "faults:\n  - {at: 1m, scale: {workload: w, replicas: 0}}\n  - {at: 2m, delete: default/w-0}\n"
                 "  - {at: 3m, pdb: {name: p, matchLabels: {app: w}, maxUnavailable: 50%}}\n",
                 id="scale, delete and a PDB"),
    pytest.param(HEAD + "workloads:\n  - {name: w, kind: Pod, namespace: kube-system}\n",
                 id="a workload in a namespace the cluster has"),
    pytest.param(HEAD + "workloads:\n  - {name: w, kind: Pod, namespace: shop}\n",
                 id="a workload in a namespace the run creates"),
    pytest.param(HEAD + "nodeConfig: {nodeLeaseDurationSeconds: 240, crashLoopBackOff: "
                 "{maxContainerRestartPeriod: 1m}}\n", id="nodeConfig fields a simulated node uses"),
]


@pytest.mark.parametrize("text", VALID_CASES)
def test_valid_scenarios_load(tmp_path: Path, text: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    assert load(path).pools


KSC = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"  # lines 1-2
SCHEDULER_CONFIG_CASES = [
    pytest.param(KSC + "bogusTop: 1\n", 3, 'strict decoding error: unknown field "bogusTop"',
                 id="an unknown top-level field: strict decoding, as kube-scheduler"),
    pytest.param(KSC + "profiles:\n  - schedulerName: default-scheduler\n    bogusField: 1\n", 5,
                 'unknown field "profiles[0].bogusField"', id="an unknown profile field"),
    pytest.param(KSC + "profiles:\n  - pluginConfig:\n      - name: NodeResourcesFit\n        args:\n"
                 "          scoringStrategy: {typ: MostAllocated}\n", 7,
                 'unknown field "profiles[0].pluginConfig[0].args.scoringStrategy.typ"',
                 id="an unknown field in a plugin's args"),
    pytest.param(KSC + "profiles:\n  - plugins: {score: {enabled: [{name: NoSuchPlugin}]}}\n", 4,
                 'profiles[0].plugins.score.enabled[0].name: Invalid value: "NoSuchPlugin": unknown plugin',
                 id="a validation error: the config's file and line"),
    pytest.param(KSC + "profiles:\n  - pluginConfig:\n      - name: NodeResourcesFit\n        args:\n"
                 "          scoringStrategy: {type: Sideways}\n", 7, 'Unsupported value: "Sideways"',
                 id="an unsupported scoring strategy: its line"),
    pytest.param(KSC + "profiles: {schedulerName: x}\n", 3, "profiles: must be a list", id="a list given as a mapping"),
    pytest.param("apiVersion: v1\nkind: KubeSchedulerConfiguration\n", 1, "expected apiVersion",
                 id="another apiVersion"),
    pytest.param(KSC + "profiles:\n  - plugins: {score: {disabled: [{name: \"*\"}]}\n", "5:1",
                 "YAML syntax: expected ',' or '}', but got '<stream end>'",
                 id="a YAML syntax error: line and column, not PyYAML's '<unicode string>'"),
]


@pytest.mark.parametrize("config,line,message", SCHEDULER_CONFIG_CASES)
def test_scheduler_configs_are_read_as_kube_scheduler_reads_them(tmp_path: Path, config: str, line: int | str,
                                                                  message: str) -> None:
    (tmp_path / "sched.yaml").write_text(config)
    _refused(tmp_path, HEAD + "schedulerConfig: [sched.yaml]\n", line, message, file="sched.yaml")
    path = tmp_path / "s.yaml"
    with pytest.raises(ScenarioError) as err:
        load(path)
    assert "<unicode string>" not in str(err.value)


def test_a_yaml_syntax_error_in_a_scenario_names_line_and_column(tmp_path: Path) -> None:
    _refused(tmp_path, "duration: 1m\nnodePools: [{name: n\n", "3:1", "YAML syntax: ")
