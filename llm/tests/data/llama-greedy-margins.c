// Greedy decoding with llama.cpp's library exactly as its llama-simple example runs it (one batch
// for the prompt, then one token at a time, default context parameters otherwise), printing per
// step the chosen token, its logit's lead over the second best, and the second best's id.
// Build: gcc llama-greedy-margins.c -I LLAMA/include -I LLAMA/ggml/include -L BIN -lllama -lggml -o margins
// Run:   LD_LIBRARY_PATH=BIN ./margins MODEL N PROMPT
// MARGINS_FA=0 or 1 turns flash attention off or on (llama-simple leaves it on auto); MARGINS_F32=1
// keeps the KV cache in f32.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"

int main(int argc, char ** argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s MODEL N PROMPT\n", argv[0]); return 2; }
    const int n_predict = atoi(argv[2]);
    const char * prompt = argv[3];
    ggml_backend_load_all();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const struct llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_prompt = -llama_tokenize(vocab, prompt, strlen(prompt), NULL, 0, true, true);
    llama_token * toks = malloc(sizeof(llama_token) * n_prompt);
    llama_tokenize(vocab, prompt, strlen(prompt), toks, n_prompt, true, true);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_prompt + n_predict - 1;
    cp.n_batch = n_prompt;
    cp.no_perf = true;
    const char * fa = getenv("MARGINS_FA");
    if (fa) cp.flash_attn_type = atoi(fa) ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    if (getenv("MARGINS_F32")) { cp.type_k = GGML_TYPE_F32; cp.type_v = GGML_TYPE_F32; }
    struct llama_context * ctx = llama_init_from_model(model, cp);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    struct llama_batch batch = llama_batch_get_one(toks, n_prompt);
    llama_token next;
    for (int step = 0; step < n_predict; step++) {
        if (llama_decode(ctx, batch)) return 1;
        const float * l = llama_get_logits_ith(ctx, -1);
        int best = 0, second = -1;
        for (int i = 1; i < n_vocab; i++) if (l[i] > l[best]) best = i;
        for (int i = 0; i < n_vocab; i++) if (i != best && (second < 0 || l[i] > l[second])) second = i;
        printf("%d %d %.5f %d\n", step, best, l[best] - l[second], second);
        if (llama_vocab_is_eog(vocab, best)) break;
        next = best;
        batch = llama_batch_get_one(&next, 1);
    }
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
