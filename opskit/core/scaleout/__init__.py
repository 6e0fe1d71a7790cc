"""The 1 -> N broker scale-out playbook (HIP-30's scaling path), pure parts.

- :mod:`.window`: the maintenance window a scheduled run may act in;
- :mod:`.plan`: preflight judgement and the ordered, idempotent steps;
- :mod:`.machine`: ``transition(state, event) -> (state, actions)``, the journal a
  runner persists before and after every step so any run can resume;
- :mod:`.k8s`: the Kubernetes objects of a broker-only StatefulSet beside HIP-30's
  combined one, and the journal's ConfigMap.
"""
