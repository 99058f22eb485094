// The settings of every transformers config (PretrainedConfig's) that change nothing a model
// computes in training: token ids, generation defaults, output switches, names. A model built
// from a folder reads them as inert, and --init does not compare them between folders.
#pragma once

#include <set>
#include <string>

namespace dtc::io {

inline bool hfSettingLeavesTrainingAlone(const std::string& key) {
  static const std::set<std::string> keys = {"_name_or_path",
                                             "transformers_version",
                                             "architectures",
                                             "torch_dtype",
                                             "bos_token_id",
                                             "eos_token_id",
                                             "sep_token_id",
                                             "decoder_start_token_id",
                                             "use_cache",
                                             "output_attentions",
                                             "output_hidden_states",
                                             "return_dict",
                                             "max_length",
                                             "min_length",
                                             "do_sample",
                                             "early_stopping",
                                             "num_beams",
                                             "num_beam_groups",
                                             "diversity_penalty",
                                             "temperature",
                                             "top_k",
                                             "top_p",
                                             "typical_p",
                                             "repetition_penalty",
                                             "length_penalty",
                                             "no_repeat_ngram_size",
                                             "encoder_no_repeat_ngram_size",
                                             "bad_words_ids",
                                             "num_return_sequences",
                                             "output_scores",
                                             "return_dict_in_generate",
                                             "forced_bos_token_id",
                                             "forced_eos_token_id",
                                             "remove_invalid_values",
                                             "exponential_decay_length_penalty",
                                             "suppress_tokens",
                                             "begin_suppress_tokens",
                                             "finetuning_task",
                                             "id2label",
                                             "label2id",
                                             "tokenizer_class",
                                             "prefix",
                                             "problem_type",
                                             "task_specific_params",
                                             "tf_legacy_loss",
                                             "use_bfloat16",
                                             "is_decoder",
                                             "chunk_size_feed_forward",
                                             "tie_encoder_decoder",
                                             "_attn_implementation",
                                             "attn_implementation",
                                             "initializer_range"};
  return keys.count(key) > 0;
}

}  // namespace dtc::io
