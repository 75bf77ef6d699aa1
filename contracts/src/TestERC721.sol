// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";
import {ERC721Burnable} from "@openzeppelin/contracts/token/ERC721/extensions/ERC721Burnable.sol";
import {ERC721Enumerable} from "@openzeppelin/contracts/token/ERC721/extensions/ERC721Enumerable.sol";
import {ERC721URIStorage} from "@openzeppelin/contracts/token/ERC721/extensions/ERC721URIStorage.sol";

/// @title TestERC721
/// @notice An ERC-721 for tests: enumerable (totalSupply, tokenByIndex), per-token URIs and
/// an ERC-7572 contract URI. There is no access control: anyone may mint and set URIs; burn
/// needs the token's owner or an approved operator.
contract TestERC721 is ERC721, ERC721Enumerable, ERC721URIStorage, ERC721Burnable {
    /// @notice ERC-7572: the contract-level metadata changed.
    event ContractURIUpdated();

    string private _contractURI;

    constructor(string memory name_, string memory symbol_) ERC721(name_, symbol_) {}

    function mint(address to, uint256 id) external {
        _safeMint(to, id);
    }

    function setTokenURI(uint256 id, string calldata uri) external {
        _setTokenURI(id, uri);
    }

    function setContractURI(string calldata uri) external {
        _contractURI = uri;
        emit ContractURIUpdated();
    }

    function contractURI() external view returns (string memory) {
        return _contractURI;
    }

    function tokenURI(uint256 tokenId) public view override(ERC721, ERC721URIStorage) returns (string memory) {
        return super.tokenURI(tokenId);
    }

    function supportsInterface(bytes4 interfaceId)
        public
        view
        override(ERC721, ERC721Enumerable, ERC721URIStorage)
        returns (bool)
    {
        return super.supportsInterface(interfaceId);
    }

    function _update(address to, uint256 tokenId, address auth)
        internal
        override(ERC721, ERC721Enumerable)
        returns (address)
    {
        return super._update(to, tokenId, auth);
    }

    function _increaseBalance(address account, uint128 value) internal override(ERC721, ERC721Enumerable) {
        super._increaseBalance(account, value);
    }
}
