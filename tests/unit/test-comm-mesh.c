/* lib/comm: the 4-D mesh. The rank formula of DESIGN.md section 5 and the
 * groups a rank belongs to, for several layouts, computed without any
 * processes (test-comm-shm checks the same groups with real ranks). */
#include "comm/comm.h"
#include "tap.h"

#include <string.h>

/* Checks the formula and its inverse over every rank. */
static void check_formula(int tp, int sh, int dp, int pp)
{
	gpt_mesh m;
	gpt_err err = {0};
	int n = tp * sh * dp * pp, good = gpt_mesh_init(&m, tp, sh, dp, pp, n, &err) == 0;
	int r = 0;
	for (int p = 0; p < pp && good; p++)
		for (int d = 0; d < dp && good; d++)
			for (int s = 0; s < sh && good; s++)
				for (int t = 0; t < tp && good; t++, r++) {
					gpt_mesh_coord c = {t, s, d, p};
					int want = ((p * dp + d) * sh + s) * tp + t;
					gpt_mesh_coord back = gpt_mesh_coord_of(&m, want);
					good = gpt_mesh_rank(&m, c) == want && want == r && back.tp == t && back.sh == s &&
					       back.dp == d && back.pp == p;
				}
	ok(good && r == n, "tp%d x sharding%d x dp%d x pp%d: rank = ((pp*dp + dp_r)*sharding + sh_r)*tp + tp_r, and back",
	   tp, sh, dp, pp);
}

/* Formats the group of rank as "0,2,4" and returns its colour via *color. */
static const char *group_str(const gpt_mesh *m, gpt_mesh_axis a, int rank, int *color)
{
	static char buf[256];
	int ranks[64], n = 0, len = 0;
	*color = gpt_mesh_group(m, a, rank, ranks, &n);
	buf[0] = '\0';
	for (int i = 0; i < n; i++)
		len += snprintf(buf + len, sizeof buf - (size_t)len, "%s%d", i ? "," : "", ranks[i]);
	return buf;
}

/* Every rank is in exactly one group per axis (embed: only the first and
 * last stages), the groups agree with each other, and colours tell groups
 * apart. */
static void check_partition(const gpt_mesh *m, const char *what)
{
	int good = 1;
	for (int a = 0; a < GPT_MESH_AXES && good; a++) {
		int seen[64] = {0}, color_of_first[64];
		for (int i = 0; i < 64; i++)
			color_of_first[i] = -2;
		for (int r = 0; r < m->world && good; r++) {
			int ranks[64], n = 0, c = gpt_mesh_group(m, (gpt_mesh_axis)a, r, ranks, &n), in = 0;
			for (int i = 0; i < n; i++) {
				in |= ranks[i] == r;
				int ranks2[64], n2 = 0;
				int c2 = gpt_mesh_group(m, (gpt_mesh_axis)a, ranks[i], ranks2, &n2);
				good &= c2 == c && n2 == n && memcmp(ranks, ranks2, sizeof(int) * (size_t)n) == 0;
			}
			if (n) {
				good &= in && c >= 0 && c < 64;
				seen[r]++;
				if (color_of_first[c] == -2)
					color_of_first[c] = ranks[0];
				good &= color_of_first[c] == ranks[0];
			} else {
				good &= a == GPT_MESH_EMBED && c == -1;
			}
		}
		int expect_members = a == GPT_MESH_TP ? m->tp : a == GPT_MESH_SHARDING ? m->sharding
				   : a == GPT_MESH_DP ? m->dp : a == GPT_MESH_PP ? m->pp
				   : a == GPT_MESH_DATA ? m->dp * m->sharding : (m->pp > 1 ? 2 : 1);
		int ranks[64], n = 0;
		gpt_mesh_group(m, (gpt_mesh_axis)a, 0, ranks, &n);
		good &= n == expect_members;
		if (!good)
			diag("axis %s is wrong", gpt_mesh_axis_name((gpt_mesh_axis)a));
	}
	ok(good, "%s: every axis partitions the ranks into groups of the right size", what);
}

int main(void)
{
	check_formula(2, 1, 2, 2);
	check_formula(1, 4, 2, 1);
	check_formula(3, 2, 1, 2);
	check_formula(2, 2, 2, 2);
	check_formula(1, 1, 1, 1);

	gpt_mesh m;
	gpt_err err = {0};
	int c;
	/* dp2 x mp2 x pp2: ranks 0..7, tp fastest. */
	gpt_mesh_init(&m, 2, 1, 2, 2, 8, &err);
	is_str(group_str(&m, GPT_MESH_TP, 5, &c), "4,5", "dp2 x mp2 x pp2: tp group of rank 5");
	is_str(group_str(&m, GPT_MESH_DP, 5, &c), "5,7", "dp2 x mp2 x pp2: dp group of rank 5");
	is_str(group_str(&m, GPT_MESH_PP, 5, &c), "1,5", "dp2 x mp2 x pp2: pp group of rank 5");
	is_str(group_str(&m, GPT_MESH_SHARDING, 5, &c), "5", "dp2 x mp2 x pp2: sharding group of rank 5 is itself");
	is_str(group_str(&m, GPT_MESH_DATA, 2, &c), "0,2", "dp2 x mp2 x pp2: data group of rank 2");
	is_str(group_str(&m, GPT_MESH_EMBED, 3, &c), "3,7", "dp2 x mp2 x pp2: embed group of rank 3 (first and last stage)");
	is_int(gpt_mesh_replica(&m, 6), 1, "dp2 x mp2 x pp2: rank 6 reads replica 1");
	check_partition(&m, "dp2 x mp2 x pp2");

	/* sharding4 x dp2: replicas are dp_r * 4 + sh_r. */
	gpt_mesh_init(&m, 1, 4, 2, 1, 8, &err);
	is_str(group_str(&m, GPT_MESH_SHARDING, 6, &c), "4,5,6,7", "sharding4 x dp2: sharding group of rank 6");
	is_str(group_str(&m, GPT_MESH_DP, 6, &c), "2,6", "sharding4 x dp2: dp group of rank 6");
	is_str(group_str(&m, GPT_MESH_DATA, 6, &c), "0,1,2,3,4,5,6,7", "sharding4 x dp2: one data group of all ranks");
	is_int(gpt_mesh_replica(&m, 6), 6, "sharding4 x dp2: rank 6 reads replica 6");
	is_str(group_str(&m, GPT_MESH_EMBED, 6, &c), "6", "sharding4 x dp2: no pipeline, embed group is itself");
	check_partition(&m, "sharding4 x dp2");

	/* tp2 x sharding2 x dp2 x pp3: 24 ranks; the middle stage has no embed group. */
	gpt_mesh_init(&m, 2, 2, 2, 3, 24, &err);
	is_str(group_str(&m, GPT_MESH_DATA, 9, &c), "9,11,13,15", "tp2 x sh2 x dp2 x pp3: data group of rank 9, by replica");
	is_str(group_str(&m, GPT_MESH_EMBED, 9, &c), "", "tp2 x sh2 x dp2 x pp3: a middle stage is in no embed group");
	is_int(c, -1, "and its colour is -1");
	is_str(group_str(&m, GPT_MESH_EMBED, 17, &c), "1,17", "tp2 x sh2 x dp2 x pp3: last stage pairs with the first");
	is_str(group_str(&m, GPT_MESH_PP, 17, &c), "1,9,17", "tp2 x sh2 x dp2 x pp3: pp group");
	check_partition(&m, "tp2 x sh2 x dp2 x pp3");

	is_int(gpt_mesh_init(&m, 2, 1, 2, 2, 6, &err), GPT_EUSAGE, "a mesh that does not fill the world");
	ok(strstr(err.msg, "tp=2 x sharding=1 x dp=2 x pp=2 = 8 ranks, but the world has 6") != NULL,
	   "names the degrees and both sizes: %s", err.msg);
	is_int(gpt_mesh_init(&m, 0, 1, 1, 1, 0, &err), GPT_EUSAGE, "a zero degree");
	return done_testing();
}
