/*
 * fuzz_kubeconfig.c - libFuzzer target for the kubeconfig parser.
 *
 * Feeds each input to kop_config_parse as one document named /fuzz/config,
 * with parse_only set so that nothing the document names is read and no
 * exec plugin runs: the target exercises YAML parsing, alias handling,
 * base64 decoding, entry merging and context selection only. A config that
 * resolves is queried and freed; under ASan a leak or an overflow fails.
 */
#include "fuzz_check.h"
#include <stddef.h>
#include <stdint.h>

#include "kop/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kop_config_opts opts = {.parse_only = true};
    kop_config *cfg = NULL;
    kop_status st;
    kop_status_clear(&st);
    kop_err err = kop_config_parse((const char *)data, size, "/fuzz/config", &opts, &cfg, &st);
    /* A refusal always says why, and hands back nothing. */
    FUZZ_CHECK(err == KOP_OK || (cfg == NULL && st.message[0] != '\0'));
    if (err == KOP_OK) {
        size_t len = 0;
        kop_credentials c;
        const char *server = kop_config_server(cfg), *ns = kop_config_namespace(cfg);
        FUZZ_CHECK(cfg != NULL && server != NULL && ns != NULL && ns[0] != '\0');
        (void)kop_config_tls_server_name(cfg);
        (void)kop_config_ca_pem(cfg, &len);
        /* Inline credentials only: parse_only refuses files and plugins. */
        if (kop_config_credentials(cfg, &c, &st) == KOP_OK)
            kop_credentials_fini(&c);
        kop_config_free(cfg);
    }
    return 0;
}
