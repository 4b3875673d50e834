"""CleanRL-style PPO (ppo.py) on a toy environment: the update step is compiled, and the learning
rate is annealed each iteration the way CleanRL does (`optimizer.param_groups[0]["lr"] = lrnow`)."""

import torch
import torch.nn as nn
from torch.distributions.categorical import Categorical

torch.manual_seed(1)

num_envs, num_steps, obs_dim, n_actions = 4, 16, 8, 3
num_iterations, update_epochs, num_minibatches = 5, 2, 4
learning_rate, gamma, gae_lambda, clip_coef, ent_coef, vf_coef = 2.5e-4, 0.99, 0.95, 0.2, 0.01, 0.5
batch_size = num_envs * num_steps
minibatch_size = batch_size // num_minibatches


def layer_init(layer, std=2**0.5, bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.critic = nn.Sequential(layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(), layer_init(nn.Linear(64, 1), std=1.0))
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(), layer_init(nn.Linear(64, n_actions), std=0.01)
        )

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


class ToyEnv:
    """A fixed random linear system: the next observation and the reward depend on the action."""

    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.transition = torch.randn(n_actions, obs_dim, obs_dim, generator=g) * 0.3
        self.payoff = torch.randn(n_actions, obs_dim, generator=g)
        self.obs = torch.randn(num_envs, obs_dim, generator=g)

    def step(self, action):
        reward = (self.payoff[action] * self.obs).sum(-1)
        self.obs = torch.tanh(torch.einsum("bij,bj->bi", self.transition[action], self.obs))
        return self.obs, reward


agent = Agent()
optimizer = torch.optim.Adam(agent.parameters(), lr=learning_rate, eps=1e-5)


@torch.compile
def update(obs, actions, logprobs, advantages, returns):
    _, newlogprob, entropy, newvalue = agent.get_action_and_value(obs, actions)
    ratio = (newlogprob - logprobs).exp()
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    pg_loss = torch.max(-advantages * ratio, -advantages * ratio.clamp(1 - clip_coef, 1 + clip_coef)).mean()
    v_loss = 0.5 * ((newvalue.view(-1) - returns) ** 2).mean()
    loss = pg_loss - ent_coef * entropy.mean() + v_loss * vf_coef
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()


env = ToyEnv()
losses = []
for iteration in range(1, num_iterations + 1):
    frac = 1.0 - (iteration - 1.0) / num_iterations
    lrnow = frac * learning_rate
    optimizer.param_groups[0]["lr"] = lrnow

    obs = torch.zeros(num_steps, num_envs, obs_dim)
    actions = torch.zeros(num_steps, num_envs, dtype=torch.long)
    logprobs = torch.zeros(num_steps, num_envs)
    rewards = torch.zeros(num_steps, num_envs)
    values = torch.zeros(num_steps, num_envs)
    next_obs = env.obs
    with torch.no_grad():
        for step in range(num_steps):
            obs[step] = next_obs
            action, logprob, _, value = agent.get_action_and_value(next_obs)
            values[step] = value.flatten()
            actions[step], logprobs[step] = action, logprob
            next_obs, rewards[step] = env.step(action)
        next_value = agent.get_value(next_obs).reshape(1, -1)
        advantages = torch.zeros_like(rewards)
        lastgaelam = 0
        for t in reversed(range(num_steps)):
            nextvalues = next_value if t == num_steps - 1 else values[t + 1]
            delta = rewards[t] + gamma * nextvalues - values[t]
            advantages[t] = lastgaelam = delta + gamma * gae_lambda * lastgaelam
        returns = advantages + values

    b_obs, b_actions = obs.reshape(-1, obs_dim), actions.reshape(-1)
    b_logprobs, b_advantages, b_returns = logprobs.reshape(-1), advantages.reshape(-1), returns.reshape(-1)
    b_inds = torch.randperm(batch_size)
    for epoch in range(update_epochs):
        for start in range(0, batch_size, minibatch_size):
            mb = b_inds[start : start + minibatch_size]
            losses.append(update(b_obs[mb], b_actions[mb], b_logprobs[mb], b_advantages[mb], b_returns[mb]))

print(f"final loss {losses[-1].item():.4f}")
