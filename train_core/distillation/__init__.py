"""Distillation: teachers scoring the student's tokens in their own chat format, reverse-KL
advantages from teacher logprobs, top-K soft targets, composite multi-teacher data."""

from train_core.distillation.advantages import (
    apply_teacher_kl,
    place_on_mask,
    reverse_kl_advantages,
    reverse_kl_per_token,
    teacher_kl_metrics,
)
from train_core.distillation.composite import (
    CompositeDataset,
    DistillationSource,
    TaggedItem,
    allocate_per_batch,
)
from train_core.distillation.teacher import (
    Teacher,
    TeacherQuery,
    TeacherSpec,
    same_tokenizer,
    score_with_teachers,
    split_turn_end,
    teacher_conversations,
    teacher_messages,
    teacher_query,
    turn_end_tokens,
)
from train_core.distillation.topk import (
    TeacherForcing,
    build_topk_distillation_datums,
    completion_topk_datums,
    sequence_topk_datum,
    sequence_topk_datums,
    teacher_forcing,
)
from train_core.rl.advantages import discounted_future_sum

__all__ = [
    "CompositeDataset",
    "DistillationSource",
    "TaggedItem",
    "Teacher",
    "TeacherForcing",
    "TeacherQuery",
    "TeacherSpec",
    "allocate_per_batch",
    "apply_teacher_kl",
    "build_topk_distillation_datums",
    "completion_topk_datums",
    "discounted_future_sum",
    "place_on_mask",
    "reverse_kl_advantages",
    "reverse_kl_per_token",
    "same_tokenizer",
    "score_with_teachers",
    "sequence_topk_datum",
    "sequence_topk_datums",
    "split_turn_end",
    "teacher_conversations",
    "teacher_forcing",
    "teacher_kl_metrics",
    "teacher_messages",
    "teacher_query",
    "turn_end_tokens",
]
