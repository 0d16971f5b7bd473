from kitchen.app.report.families import family_of, group_keys


def test_cookbook_keys_land_in_their_family():
    assert family_of("train_mean_nll") == "Loss / NLL"
    assert family_of("test/bpb") == "Loss / NLL"
    assert family_of("env/all/reward/total") == "Reward"
    assert family_of("accuracy") == "Accuracy and margin"
    assert family_of("chosen_reward") == "Accuracy and margin"  # DPO's implicit reward
    assert family_of("optim/kl_sample_train_v1") == "KL"
    assert family_of("optim/entropy") == "Entropy"
    assert family_of("optim/lr") == "Learning rate"
    assert family_of("learning_rate") == "Learning rate"
    assert family_of("grad_norm") == "Grad norm"
    assert family_of("unclipped_grad_l2:mean") == "Grad norm"  # Tinker's key
    assert family_of("time/rollouts") == "Step time"
    assert family_of("num_loss_tokens") == "Tokens and data"  # a count, not a loss
    assert family_of("time/forward_backward") == "Step time"
    assert family_of("tokens_per_second") == "Throughput"  # a rate, not a count
    assert family_of("memory/peak_gib") == "Memory"


def test_unknown_keys_are_grouped_by_prefix_and_come_last():
    groups = group_keys(["custom/thing", "train_mean_nll", "zeta", "time/total"])
    assert list(groups) == ["Loss / NLL", "Step time", "Other: custom", "Other: other"]
    assert groups["Other: other"] == ["zeta"]
