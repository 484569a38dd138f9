"""`saga show --output` shows how the grouper formed its groups: the similarity of
members joined by embeddings, the model, and why embeddings were not used."""

from __future__ import annotations

import msgspec

from saga.cli.outputs import render_outputs
from saga.steps.models import (
    Biomarker,
    BiomarkerGroup,
    GrouperOutput,
    JoinedBy,
    MemberSource,
)


def shown(output: GrouperOutput) -> str:
    return render_outputs({"grouper": msgspec.json.encode(output).decode()})


def test_members_joined_by_embeddings_show_their_similarity() -> None:
    """A member the embeddings placed carries its score; the model is named."""
    group = BiomarkerGroup(
        canonical_name="Glucose",
        members=["Glucose", "Blutglukose"],
        biomarkers=[Biomarker(name="Glucose"), Biomarker(name="Blutglukose")],
        sources=[
            MemberSource(name="Glucose", joined_by=JoinedBy.SYNONYM),
            MemberSource(name="Blutglukose", joined_by=JoinedBy.EMBEDDING, score=0.9712),
        ],
    )
    text = shown(GrouperOutput(group_count=1, groups=[group], embedding_model="openai/m"))
    assert "Glucose, Blutglukose (embedding 0.97)" in text
    assert "grouped by embeddings: openai/m" in text


def test_the_fallback_reason_is_shown() -> None:
    """Offline groups because the circuit was open: the warning is printed."""
    warning = "embeddings unavailable (circuit embedding open): grouped offline"
    text = shown(GrouperOutput(group_count=0, groups=[], warnings=[warning]))
    assert text.splitlines()[1:] == ["no groups", f"warning: {warning}"]
