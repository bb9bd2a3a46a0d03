/* An attncheck plugin in plain C: declares every feature of the ABI and
 * computes attention straightforwardly (attention_c.c). Build it as a shared
 * library and check it with
 *     attncheck verify --impl plugin:./libattn_example_plugin.so */
#include "attention_c.h"
#include "attn_plugin.h"

static const attn_plugin example_plugin = {
    ATTN_PLUGIN_ABI_VERSION,
    "example-c",
    ATTN_FEATURE_CROSS | ATTN_FEATURE_DV_NE_DK | ATTN_FEATURE_BATCH_HEADS | ATTN_FEATURE_SCALE |
        ATTN_FEATURE_TEMPERATURE | ATTN_FEATURE_CAUSAL_TOP_LEFT |
        ATTN_FEATURE_CAUSAL_BOTTOM_RIGHT | ATTN_FEATURE_KEY_PADDING | ATTN_FEATURE_EXPLICIT_MASK |
        ATTN_FEATURE_EMPTY_ROW_REJECT | ATTN_FEATURE_EMPTY_ROW_ZERO | ATTN_FEATURE_WEIGHTS,
    ATTN_PRECISION_FP32,
    attention_c_forward,
};

ATTN_PLUGIN_EXPORT const attn_plugin *attn_plugin_init(void) { return &example_plugin; }
